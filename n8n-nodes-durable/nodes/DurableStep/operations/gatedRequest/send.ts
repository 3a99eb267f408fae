import type { IDataObject, IExecuteFunctions, IHttpRequestOptions } from 'n8n-workflow';
import { readSideEffectFailure } from '../recordOutcome/classify';
import type { LookUpVerdict, Performed, SideEffect, StepTicket } from '../gated/effect';
import { idAt, itemJson, parsed, receiptOf } from './answer';
import type { HttpCall } from './request';

type Answer = { status: number; body: unknown };

/** The remote's answer, whatever its status; transport failures throw. */
async function exchange(ctx: IExecuteFunctions, authentication: string, options: IHttpRequestOptions): Promise<Answer> {
	const full = { ...options, returnFullResponse: true, ignoreHttpStatusErrors: true };
	const response = (
		authentication === 'none'
			? await ctx.helpers.httpRequest(full)
			: await ctx.helpers.httpRequestWithAuthentication.call(ctx, authentication, full)
	) as { statusCode: number; body: unknown };
	return { status: Number(response.statusCode), body: parsed(response.body) };
}

/**
 * The body as sent: with "Add Step Ticket to Body", plus the ticket fields a remote that checks
 * the ledger itself needs (the publishing proxy: operation_key, job_id, fencing_token). Added
 * after the digest was taken, so that a new run's token does not change the step's payload.
 */
function withTicket(call: HttpCall, ticket: StepTicket): unknown {
	const body = call.body;
	if (!call.ticketInBody || !body || typeof body !== 'object' || Array.isArray(body)) return body;
	const fields = { operation_key: ticket.operation_key, job_id: ticket.job_id, fencing_token: ticket.fencing_token };
	if (call.bodyType === 'form') return { ...(body as IDataObject), ...Object.fromEntries(Object.entries(fields).map(([k, v]) => [k, String(v)])) };
	return { ...(body as IDataObject), ...fields };
}

function requestOptions(call: HttpCall, ticket: StepTicket): IHttpRequestOptions {
	const headers: IDataObject = { Accept: 'application/json', ...call.headers };
	// The key is the step's, not the item's: a remote that honours the header dedupes a repeat too.
	if (call.idempotencyHeader) headers[call.idempotencyHeader] = ticket.operation_key;
	const options: IHttpRequestOptions = { method: call.method, url: call.url, headers, timeout: call.timeout, json: true };
	const body = withTicket(call, ticket);
	if (call.bodyType === 'json') options.body = body as IDataObject;
	if (call.bodyType === 'form') {
		options.body = new URLSearchParams(body as Record<string, string>);
		options.json = false;
	}
	return options;
}

/** Sends the gated request once; a 4xx/5xx or a transport failure is a failure for the ledger to classify. */
export async function sendOnce(
	ctx: IExecuteFunctions,
	call: HttpCall,
	ticket: StepTicket,
	remoteIdPath: string,
	paths: string[],
): Promise<Performed> {
	let answer: Answer;
	try {
		answer = await exchange(ctx, call.authentication, requestOptions(call, ticket));
	} catch (error) {
		const e = error as { message?: string; code?: string; cause?: { code?: string } };
		const message = String(e?.message ?? error);
		const failure = readSideEffectFailure({ json: { error: { message, code: e?.code, cause: e?.cause } } }) ?? {
			httpStatus: null,
			errorKind: null,
			message,
		};
		return { ok: false, failure };
	}
	if (answer.status < 200 || answer.status >= 300) {
		const text = typeof answer.body === 'string' ? answer.body : JSON.stringify(answer.body ?? '');
		return { ok: false, failure: { httpStatus: answer.status, errorKind: null, message: `HTTP ${answer.status}: ${text.slice(0, 300)}` } };
	}
	return {
		ok: true,
		remoteId: idAt(answer.body, remoteIdPath) ?? ticket.operation_key,
		receipt: receiptOf(answer.body, paths),
		json: itemJson(answer.body),
	};
}

/**
 * The built-in lookup: GET the URL with the step's key in it. Only an answer that was read
 * decides: the object (found), or proof there is none (404, an empty list, an answer without the
 * ID: absent). Any other status, like a transport failure, throws: a lookup that failed says
 * nothing about the write, and the step stays unknown for the next run to look up again.
 */
export async function lookUpOnce(
	ctx: IExecuteFunctions,
	call: HttpCall,
	urlTemplate: string,
	ticket: StepTicket,
	idPath: string,
	paths: string[],
): Promise<LookUpVerdict> {
	const url = urlTemplate.split('{operation_key}').join(encodeURIComponent(ticket.operation_key));
	const headers: IDataObject = { Accept: 'application/json', ...call.headers };
	const answer = await exchange(ctx, call.authentication, { method: 'GET', url, headers, timeout: call.timeout, json: true });
	const evidence: IDataObject = { lookup_url: url, http_status: answer.status };
	if (answer.status === 404) return { result: 'absent', evidence };
	if (answer.status < 200 || answer.status >= 300) throw new Error(`the lookup answered HTTP ${answer.status}`);
	const found = Array.isArray(answer.body) ? answer.body[0] : answer.body;
	const remoteId = found === undefined ? undefined : idAt(found, idPath);
	if (remoteId === undefined) return { result: 'absent', evidence: { ...evidence, matches: Array.isArray(answer.body) ? answer.body.length : 0 } };
	return { result: 'found', remoteId, receipt: receiptOf(found, paths), evidence: { ...evidence, remote_id: remoteId } };
}

export function httpEffect(call: HttpCall, remoteIdPath: string, paths: string[], lookUp?: { url: string; idPath: string }): SideEffect {
	return {
		inFlightMs: call.timeout,
		perform: (ctx, _i, ticket) => sendOnce(ctx, call, ticket, remoteIdPath, paths),
		lookUp: lookUp ? (ctx, _i, ticket) => lookUpOnce(ctx, call, lookUp.url, ticket, lookUp.idPath, paths) : undefined,
	};
}
