// The request on the wire: how n8n's helpers send it and what comes back, whatever the status.
import type { IDataObject, IExecuteFunctions, IHttpRequestOptions } from 'n8n-workflow';
import type { StepTicket } from '../gated/effect';
import { parsed } from './answer';
import type { HttpCall } from './request';

/** `replayed`: the remote marked the answer as the stored one of an earlier request with the same key. */
export type Answer = { status: number; contentType: string; body: unknown; replayed: boolean };

/** The remote's answer, whatever its status; transport failures throw. */
export async function exchange(ctx: IExecuteFunctions, authentication: string, options: IHttpRequestOptions): Promise<Answer> {
	const full = { ...options, returnFullResponse: true, ignoreHttpStatusErrors: true };
	const response = (
		authentication === 'none'
			? await ctx.helpers.httpRequest(full)
			: await ctx.helpers.httpRequestWithAuthentication.call(ctx, authentication, full)
	) as { statusCode: number; headers?: IDataObject; body: unknown };
	const contentType = String(response.headers?.['content-type'] ?? '');
	const replayed = String(response.headers?.['idempotent-replayed'] ?? '').toLowerCase() === 'true';
	return { status: Number(response.statusCode), contentType, body: parsed(response.body), replayed };
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

export function requestOptions(call: HttpCall, ticket: StepTicket): IHttpRequestOptions {
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
