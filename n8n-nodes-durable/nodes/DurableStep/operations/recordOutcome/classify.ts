import type { IDataObject, INodeExecutionData } from 'n8n-workflow';

/**
 * Facts about a failed side effect, read from the item an n8n node put on its error output
 * (`On Error: Continue (using error output)`) or on its main output (`Continue`).
 *
 * n8n shapes such items as `{error, details?, ...the input item's fields}`: `error` is the
 * serialised request error (axios-like: `code`, `status`, `message`, maybe `httpCode`) or just a
 * message string; HTTP Request >= 4.5 adds `details.httpCode`.
 */
export interface SideEffectFailure {
	httpStatus: number | null;
	/** timeout / connection_reset: the request may have been applied; refused: it was not sent. */
	errorKind: 'timeout' | 'connection_reset' | 'connection_refused' | null;
	message: string;
}

const TIMEOUT_CODES = new Set(['ECONNABORTED', 'ETIMEDOUT', 'ESOCKETTIMEDOUT', 'ERR_CANCELED']);
const RESET_CODES = new Set(['ECONNRESET', 'EPIPE', 'ERR_STREAM_PREMATURE_CLOSE']);
// Nothing reached the remote: the connection was never established.
const REFUSED_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH']);

function asStatus(value: unknown): number | null {
	const n = typeof value === 'string' ? Number.parseInt(value, 10) : Number(value);
	return Number.isInteger(n) && n >= 100 && n <= 599 ? n : null;
}

function firstStatus(candidates: unknown[]): number | null {
	for (const c of candidates) {
		const s = asStatus(c);
		if (s !== null) return s;
	}
	return null;
}

/** Returns the failure facts when the item carries an n8n error, otherwise null. */
export function readSideEffectFailure(item: INodeExecutionData): SideEffectFailure | null {
	const json = item.json ?? {};
	const raw = (item.error as unknown) ?? json.error;
	if (raw === undefined || raw === null || raw === false || raw === '') return null;

	const err: IDataObject = typeof raw === 'object' ? (raw as IDataObject) : { message: String(raw) };
	const details = (json.details ?? {}) as IDataObject;
	const cause = (err.cause ?? {}) as IDataObject;
	const response = (err.response ?? {}) as IDataObject;
	const message = String(err.message ?? details.message ?? json.message ?? 'side effect failed');

	const codes = [err.code, cause.code, (err.context as IDataObject | undefined)?.code]
		.filter((c) => typeof c === 'string')
		.map((c) => String(c).toUpperCase());
	const text = `${message} ${String(err.description ?? '')} ${String(details.message ?? '')}`.toLowerCase();

	let errorKind: SideEffectFailure['errorKind'] = null;
	if (codes.some((c) => TIMEOUT_CODES.has(c)) || /timed? ?out|timeout of \d+ms exceeded/.test(text)) {
		errorKind = 'timeout';
	} else if (codes.some((c) => RESET_CODES.has(c)) || /socket hang up|econnreset|connection (was )?reset/.test(text)) {
		errorKind = 'connection_reset';
	} else if (codes.some((c) => REFUSED_CODES.has(c)) || /econnrefused|enotfound/.test(text)) {
		errorKind = 'connection_refused';
	}

	const httpStatus =
		errorKind === null
			? firstStatus([
					details.httpCode,
					err.httpCode,
					err.status,
					err.statusCode,
					response.status,
					response.statusCode,
					cause.status,
					// NodeApiError messages start with the status, e.g. "500 - \"...\""
					/^(\d{3})\b/.exec(message)?.[1],
					/status code (\d{3})/.exec(message)?.[1],
				])
			: null;
	return { httpStatus, errorKind, message };
}
