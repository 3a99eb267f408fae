import type {
	ICredentialDataDecryptedObject,
	IDataObject,
	IExecuteFunctions,
	IHttpRequestMethods,
	IHttpRequestOptions,
	JsonObject,
} from 'n8n-workflow';
import { NodeApiError } from 'n8n-workflow';

export const CREDENTIAL_NAME = 'durableLedgerApi';

/** The package's credential for a Gated HTTP Request's remote (header, bearer or basic). */
export const HTTP_AUTH_CREDENTIAL = 'durableHttpAuthApi';

/** A ledger refusal: the HTTP status plus the `{error: {code, message, details}}` body. */
export interface LedgerRefusal {
	status: number;
	code: string;
	message: string;
	details: IDataObject;
}

export type LedgerAnswer =
	| { ok: true; status: number; body: IDataObject }
	| { ok: false; refusal: LedgerRefusal };

/** Operation keys contain ':' and are single path segments. */
export function operationPath(operationKey: string, verb?: string): string {
	const base = `/v1/operations/${encodeURIComponent(operationKey)}`;
	return verb ? `${base}/${verb}` : base;
}

export function jobPath(jobId: string, suffix = ''): string {
	return `/v1/jobs/${encodeURIComponent(jobId)}${suffix}`;
}

function asRefusal(status: number, body: unknown): LedgerRefusal {
	const error = ((body as IDataObject | undefined)?.error ?? {}) as IDataObject;
	return {
		status,
		code: typeof error.code === 'string' ? error.code : `http_${status}`,
		message:
			typeof error.message === 'string'
				? error.message
				: `The ledger answered HTTP ${status}${typeof body === 'string' && body ? `: ${body.slice(0, 200)}` : ''}`,
		details: (error.details as IDataObject) ?? {},
	};
}

/** Node's network error codes in words (n8n replaces a message that contains the code itself). */
const NO_ANSWER: Readonly<Record<string, string>> = {
	ECONNREFUSED: 'connection refused: is the ledger running on that host and port?',
	ENOTFOUND: 'host not found',
	EAI_AGAIN: 'host name lookup failed',
	ETIMEDOUT: 'timed out',
	ECONNABORTED: 'timed out',
	ECONNRESET: 'connection closed before an answer',
	EHOSTUNREACH: 'host unreachable',
};

function networkCode(error: unknown): string {
	const e = (error ?? {}) as { code?: unknown; cause?: { code?: unknown }; message?: unknown };
	for (const code of [e.code, e.cause?.code]) if (typeof code === 'string' && code) return code;
	const inMessage = String(e.message ?? '').match(/\b(E[A-Z_]{4,})\b/);
	return inMessage ? inMessage[1] : '';
}

/**
 * The NodeApiError for a request that got no HTTP answer (connection refused, DNS, timeout).
 * Its message must not contain the network code: NodeApiError would replace a message with
 * "ECONNREFUSED" in it (or an error object with that code) by n8n's generic text, and the
 * builder would never see `ledger_unreachable` nor the URL.
 */
export function unreachableError(
	ctx: IExecuteFunctions,
	error: unknown,
	itemIndex: number,
	request: string,
	baseUrl: string,
): NodeApiError {
	const code = networkCode(error);
	const why = NO_ANSWER[code] ?? 'no answer';
	const message = `ledger_unreachable: ${request} got no answer from ${baseUrl || 'the Base URL'} (${why})`;
	return new NodeApiError(ctx.getNode(), { message, code: 'ledger_unreachable' } as JsonObject, {
		itemIndex,
		message,
		description: `Check the Base URL in the Durable Ledger API credential (${baseUrl}; durable-ledger serve listens on port 8787 unless --port or DURABLE_PORT say otherwise) and that the ledger service is running. Cause: ${String((error as Error)?.message ?? error)}`,
	});
}

/** A batch slot's `{error: {..., http_status}}` as the refusal the single-item route would have returned. */
export function slotRefusal(error: IDataObject): LedgerRefusal {
	const code = typeof error.code === 'string' && error.code ? error.code : 'ledger_error';
	// The ledger puts the status the single-item route would have answered into each slot.
	const status = typeof error.http_status === 'number' ? error.http_status : 500;
	return {
		status,
		code,
		message: typeof error.message === 'string' ? error.message : `The ledger refused this item (${code})`,
		details: (error.details as IDataObject) ?? {},
	};
}

/**
 * Which execution makes the call: the ledger stores it with every operation event, so the job
 * timeline links each step to the n8n execution that did it.
 */
export function n8nHeaders(ctx: IExecuteFunctions): Record<string, string> {
	const headers: Record<string, string> = {};
	try {
		const executionId = ctx.getExecutionId();
		if (executionId) headers['X-N8N-Execution-Id'] = String(executionId);
		const workflowId = ctx.getWorkflow()?.id;
		if (workflowId) headers['X-N8N-Workflow-Id'] = String(workflowId);
	} catch {
		// Provenance only: a context without these (an unsaved workflow) sends the call without them.
	}
	return headers;
}

/** The outcome of one HTTP call: the ledger's answer, or an error for any item it stood for. */
export type LedgerSent = { answer: LedgerAnswer } | { unreachable: (itemIndex: number) => NodeApiError };

/**
 * The ledger credential, read once per node execution (one `ctx`) instead of twice per ledger
 * call (here for the Base URL, and inside n8n's helper for the token): each read is a database
 * query and a decryption in n8n (1.5-7 ms measured in `n8n start`). Its values cannot depend on
 * the item: n8n's helper always read it without one. A failed read is not kept, so the next call
 * reads again.
 *
 * The nodes of one execution that use the same credential (by ID) share its read, for at most
 * EXECUTION_READ_MS: Start Job and every gated step of a run would otherwise read it again, node
 * after node. An edit of the credential reaches the next execution (a new ID pair), and one that
 * runs longer than that window reads it again.
 */
const credentialReads = new WeakMap<object, Promise<ICredentialDataDecryptedObject>>();
const EXECUTION_READ_MS = 60_000;
const executionReads = new Map<string, { at: number; read: Promise<ICredentialDataDecryptedObject> }>();

function executionKey(ctx: IExecuteFunctions): string | undefined {
	try {
		const credentialId = ctx.getNode().credentials?.[CREDENTIAL_NAME]?.id;
		const executionId = ctx.getExecutionId();
		return credentialId && executionId ? `${executionId}\u0000${credentialId}` : undefined;
	} catch {
		return undefined; // a context without them: read per node
	}
}

function sharedRead(
	key: string | undefined,
	read: () => Promise<ICredentialDataDecryptedObject>,
): Promise<ICredentialDataDecryptedObject> {
	if (key === undefined) return read();
	const now = Date.now();
	for (const [k, entry] of executionReads) if (now - entry.at > EXECUTION_READ_MS) executionReads.delete(k);
	const kept = executionReads.get(key);
	if (kept !== undefined) return kept.read;
	const fresh = read();
	executionReads.set(key, { at: now, read: fresh });
	fresh.catch(() => executionReads.delete(key));
	return fresh;
}

function ledgerCredentials(ctx: IExecuteFunctions, itemIndex: number): Promise<ICredentialDataDecryptedObject> {
	let read = credentialReads.get(ctx);
	if (read === undefined) {
		read = sharedRead(executionKey(ctx), async () => await ctx.getCredentials(CREDENTIAL_NAME, itemIndex));
		credentialReads.set(ctx, read);
		read.catch(() => credentialReads.delete(ctx));
	}
	return read;
}

/**
 * Sends one request. A transport failure is returned as a factory of the NodeApiError for a
 * given item, so that one request made for many items (the batch route) can fail each of them
 * the way its own request would have.
 */
export async function ledgerSend(
	ctx: IExecuteFunctions,
	method: IHttpRequestMethods,
	path: string,
	body: IDataObject | undefined,
	itemIndex: number,
): Promise<LedgerSent> {
	const credentials = await ledgerCredentials(ctx, itemIndex);
	const baseUrl = String(credentials.baseUrl ?? '').replace(/\/+$/, '');
	const options: IHttpRequestOptions = {
		method,
		url: `${baseUrl}${path}`,
		json: true,
		returnFullResponse: true,
		ignoreHttpStatusErrors: true,
		timeout: 30000,
		headers: { Accept: 'application/json', ...n8nHeaders(ctx) },
	};
	if (body !== undefined) options.body = body;
	let response: { statusCode: number; body: unknown };
	try {
		// The credential already read, so that n8n's helper does not read it again (a copy: the
		// helper may add pre-authentication data to it). n8n 2.40 builds a new http.Agent for every
		// request and takes no agent from a node, so the connection itself cannot be kept alive.
		const credentialsDecrypted = { id: '', name: CREDENTIAL_NAME, type: CREDENTIAL_NAME, data: { ...credentials } };
		response = (await ctx.helpers.httpRequestWithAuthentication.call(ctx, CREDENTIAL_NAME, options, {
			credentialsDecrypted,
		})) as { statusCode: number; body: unknown };
	} catch (error) {
		return { unreachable: (i: number) => unreachableError(ctx, error, i, `${method} ${path}`, baseUrl) };
	}
	const status = Number(response.statusCode);
	if (status >= 200 && status < 300) {
		return { answer: { ok: true, status, body: (response.body as IDataObject) ?? {} } };
	}
	return { answer: { ok: false, refusal: asRefusal(status, response.body) } };
}

/**
 * Calls the ledger and returns its answer without throwing on 4xx/5xx, so that callers can
 * route expected refusals (digest mismatch, stale token) instead of failing the node.
 * Transport failures (connection refused, DNS, timeout) are thrown as NodeApiError.
 */
export async function ledgerRequest(
	ctx: IExecuteFunctions,
	method: IHttpRequestMethods,
	path: string,
	body: IDataObject | undefined,
	itemIndex: number,
): Promise<LedgerAnswer> {
	const sent = await ledgerSend(ctx, method, path, body, itemIndex);
	if ('unreachable' in sent) throw sent.unreachable(itemIndex);
	return sent.answer;
}

/** Turns a ledger refusal into the NodeApiError users see, with the ledger's error code first. */
export function refusalError(
	ctx: IExecuteFunctions,
	refusal: LedgerRefusal,
	itemIndex: number,
	what: string,
): NodeApiError {
	return new NodeApiError(
		ctx.getNode(),
		{ error: { code: refusal.code, message: refusal.message, details: refusal.details } } as JsonObject,
		{
			itemIndex,
			httpCode: String(refusal.status),
			message: `${refusal.code}: ${refusal.message}`,
			description: `${what} was refused by the ledger (HTTP ${refusal.status}). Details: ${JSON.stringify(refusal.details)}`,
		},
	);
}

/** Calls the ledger and throws NodeApiError on any refusal. */
export async function ledgerCall(
	ctx: IExecuteFunctions,
	method: IHttpRequestMethods,
	path: string,
	body: IDataObject | undefined,
	itemIndex: number,
	what: string,
): Promise<IDataObject> {
	const answer = await ledgerRequest(ctx, method, path, body, itemIndex);
	if (!answer.ok) throw refusalError(ctx, answer.refusal, itemIndex, what);
	return answer.body;
}
