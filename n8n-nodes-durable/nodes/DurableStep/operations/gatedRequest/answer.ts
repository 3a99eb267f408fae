import type { IDataObject } from 'n8n-workflow';

export { atPath, idAt, receiptOf, receiptPaths } from '../gated/receipt';

/** A body as text or JSON: JSON when it parses. */
export function parsed(body: unknown): unknown {
	if (typeof body !== 'string') return body;
	try {
		return JSON.parse(body);
	} catch {
		return body;
	}
}

/** The Done item's json: the answer's fields (an object answer), else `{data: answer}`. */
export function itemJson(body: unknown): IDataObject {
	if (body && typeof body === 'object' && !Array.isArray(body)) return body as IDataObject;
	return { data: (body ?? null) as IDataObject[string] };
}
