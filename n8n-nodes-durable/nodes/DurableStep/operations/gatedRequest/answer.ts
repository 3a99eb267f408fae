export { atPath, idAt, itemJson, receiptOf, receiptPaths } from '../gated/receipt';

/** A body as text or JSON: JSON when it parses. */
export function parsed(body: unknown): unknown {
	if (typeof body !== 'string') return body;
	try {
		return JSON.parse(body);
	} catch {
		return body;
	}
}
