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

/** An answer as an item's json: the answer's fields (an object), else `{data: answer}`. */
export function itemJson(body: unknown): IDataObject {
	if (body && typeof body === 'object' && !Array.isArray(body)) return body as IDataObject;
	return { data: (body ?? null) as IDataObject[string] };
}

/** In a receipt's paths: the whole answer (node 1.5 with Receipt Fields empty). */
export const WHOLE_ANSWER = '';

/**
 * The largest whole answer kept as the receipt. The ledger refuses a receipt larger than
 * DURABLE_MAX_RECEIPT_BYTES of canonical JSON (64 KiB unless its operator changed it) with 422,
 * and that refusal would leave the step unrecorded after the write: a larger answer keeps only the
 * Remote ID field (and the Receipt Fields, when set). The ledger escapes non-ASCII characters, so
 * each counts 6 bytes here.
 */
export const MAX_WHOLE_RECEIPT_BYTES = 48 * 1024;

export function canonicalSize(value: unknown): number {
	const text = JSON.stringify(value) ?? '';
	let size = 0;
	for (let k = 0; k < text.length; k++) size += text.charCodeAt(k) < 128 ? 1 : 6;
	return size;
}

/**
 * The receipt kept for the step: the answer's fields at the given paths, nested as in the answer,
 * so that Done Before's item reads like Done's ($json.link, $json.data.id) for those fields. With
 * WHOLE_ANSWER among the paths, the whole answer as the Done item has it, when it is small enough.
 */
export function receiptOf(body: unknown, paths: string[]): IDataObject {
	if (paths.includes(WHOLE_ANSWER)) {
		const whole = itemJson(body);
		if (canonicalSize(whole) <= MAX_WHOLE_RECEIPT_BYTES) return whole;
	}
	const receipt: IDataObject = {};
	for (const path of paths) {
		if (path === WHOLE_ANSWER) continue;
		const v = atPath(body, path);
		if (v !== undefined) setPath(receipt, path, v);
	}
	return receipt;
}

/**
 * The paths of the receipt: the Remote ID field and the Receipt Fields; with Receipt Fields empty
 * and `whole` (node 1.5), the whole answer first (the Remote ID field if it is too large).
 */
export function receiptPaths(remoteIdPath: string, fields: string, whole = false): string[] {
	const paths = fields.split(',').map((p) => p.trim()).filter((p) => p !== '');
	const named = [...new Set([remoteIdPath, ...paths].filter((p) => p !== ''))];
	return whole && paths.length === 0 ? [WHOLE_ANSWER, ...named] : named;
}
