// Settling an attempt whose outcome is unknown: ask the remote, and decide only on what it proves.
import type { IDataObject, IExecuteFunctions } from 'n8n-workflow';
import type { LookUpVerdict, StepTicket } from '../gated/effect';
import { idAt, receiptOf } from '../gated/receipt';
import { proofOf, type LookUpRule } from './proof';
import type { HttpCall } from './request';
import { exchange, requestOptions } from './wire';

/** How an unknown outcome is settled: a lookup URL read by a rule, or the request resent. */
export type Settle = { by: 'lookUp'; url: string; rule: LookUpRule } | { by: 'resend' };

const KEY = '{operation_key}';

/** The builder's text with the step's key put in ("{operation_key}", URL-encoded where asked). */
export const withKey = (text: string, key: string, encode = false) => text.split(KEY).join(encode ? encodeURIComponent(key) : key);

/**
 * The built-in lookup: GET the URL with the step's key in it, and read the answer by the rule
 * (proof.ts). A status other than 2xx and 404, like a transport failure, throws: a lookup that
 * failed says nothing about the write, and the step stays unknown for the next run to ask again.
 */
export async function lookUpOnce(
	ctx: IExecuteFunctions,
	call: HttpCall,
	urlTemplate: string,
	ticket: StepTicket,
	rule: LookUpRule,
	paths: string[],
): Promise<LookUpVerdict> {
	const url = withKey(urlTemplate, ticket.operation_key, true);
	const headers: IDataObject = { Accept: 'application/json', ...call.headers };
	const answer = await exchange(ctx, call.authentication, { method: 'GET', url, headers, timeout: call.timeout, json: true });
	if (answer.status !== 404 && (answer.status < 200 || answer.status >= 300)) throw new Error(`the lookup answered HTTP ${answer.status}`);
	const keyed = { ...rule, matchValue: withKey(rule.matchValue, ticket.operation_key) };
	const proof = proofOf(answer, keyed);
	const evidence: IDataObject = { lookup_url: url, ...proof.evidence };
	if (proof.result !== 'found') return { result: proof.result, evidence };
	return { result: 'found', remoteId: proof.remoteId, receipt: receiptOf(proof.object, paths), evidence };
}

// A remote that keeps the first answer under the key (the IETF Idempotency-Key draft, Stripe...)
// answers these while the first request is still being processed, or for now: ask again later.
const NOT_YET = new Set([409, 425, 429]);

/**
 * "The remote honours the idempotency header": the same request, with the same key, answers what
 * the first one did. A 2xx is the stored result (found, with its ID and receipt); 409 / 425 / 429
 * / 5xx, like a transport failure, throw (the first request may still be in progress; the step
 * stays unknown and the next run resends again); any other answer, and a 5xx the remote marks
 * `Idempotent-Replayed: true`, proves nothing: undecidable.
 */
export async function resendOnce(
	ctx: IExecuteFunctions,
	call: HttpCall,
	ticket: StepTicket,
	remoteIdPath: string,
	paths: string[],
): Promise<LookUpVerdict> {
	const answer = await exchange(ctx, call.authentication, requestOptions(call, ticket));
	const evidence: IDataObject = { resent: `${call.method} ${call.url}`, idempotency_header: call.idempotencyHeader, http_status: answer.status };
	// A 5xx marked as the stored answer (Stripe's API v1 replays one) will be the answer to every
	// resend: no verdict would ever come, so an editor decides. An unmarked one may be passing.
	const replayedFailure = answer.status >= 500 && answer.replayed;
	if (!replayedFailure && (NOT_YET.has(answer.status) || answer.status >= 500)) throw new Error(`the resent request answered HTTP ${answer.status}`);
	if (answer.status < 200 || answer.status >= 300) {
		const text = typeof answer.body === 'string' ? answer.body : JSON.stringify(answer.body ?? null);
		const reason = replayedFailure ? 'the remote replays a failure stored under the key' : 'the resent request was refused';
		return { result: 'undecidable', evidence: { ...evidence, reason, answer_excerpt: text.slice(0, 200) } };
	}
	// The same rule as a first answer (send.ts): no ID in it, the operation key stands for it.
	const id = idAt(answer.body, remoteIdPath) ?? ticket.operation_key;
	return { result: 'found', remoteId: id, receipt: receiptOf(answer.body, paths), evidence: { ...evidence, remote_id: id } };
}
