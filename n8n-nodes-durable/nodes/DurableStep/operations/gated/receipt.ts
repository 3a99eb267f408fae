// The answer of a side effect (an HTTP response, a sub-workflow's item): its remote id and receipt.
import type { IDataObject } from 'n8n-workflow';

/** The value at a dot path ("data.id", "items.0.id"); undefined when any step is missing. */
export function atPath(value: unknown, path: string): unknown {
	let here: unknown = value;
	for (const part of path.split('.').filter((p) => p !== '')) {
		if (here === null || typeof here !== 'object') return undefined;
		here = (here as Record<string, unknown>)[part];
	}
	return here;
}

function setPath(target: IDataObject, path: string, value: unknown) {
	const parts = path.split('.').filter((p) => p !== '');
	let here = target;
	parts.slice(0, -1).forEach((p) => {
		if (!here[p] || typeof here[p] !== 'object') here[p] = {};
		here = here[p] as IDataObject;
	});
	if (parts.length) here[parts[parts.length - 1]] = value as IDataObject[string];
}

/** An ID worth recording: a non-empty string or a number. */
export function idAt(body: unknown, path: string): string | undefined {
	const v = path ? atPath(body, path) : undefined;
	if (typeof v === 'number' && Number.isFinite(v)) return String(v);
	return typeof v === 'string' && v.trim() !== '' ? v : undefined;
}

/**
 * The receipt kept for the step: the answer's fields at the given paths, nested as in the answer,
 * so that Done Before's item reads like Done's ($json.link, $json.data.id) for those fields.
 */
export function receiptOf(body: unknown, paths: string[]): IDataObject {
	const receipt: IDataObject = {};
	for (const path of paths) {
		const v = atPath(body, path);
		if (v !== undefined) setPath(receipt, path, v);
	}
	return receipt;
}

export function receiptPaths(remoteIdPath: string, fields: string): string[] {
	const paths = fields.split(',').map((p) => p.trim()).filter((p) => p !== '');
	return [...new Set([remoteIdPath, ...paths].filter((p) => p !== ''))];
}

