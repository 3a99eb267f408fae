import type { IExecuteFunctions } from 'n8n-workflow';
import { readSideEffectFailure } from '../recordOutcome/classify';
import type { Performed, SideEffect, StepTicket } from '../gated/effect';
import { idAt, itemJson, receiptOf } from './answer';
import { lookUpOnce, resendOnce, type Settle } from './lookup';
import type { HttpCall } from './request';
import { exchange, requestOptions, type Answer } from './wire';

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
 * The request as a side effect. Its unknown outcomes are settled by resending it (a remote that
 * dedupes by the idempotency header answers the stored result), by the lookup URL, or not at all.
 */
export function httpEffect(call: HttpCall, remoteIdPath: string, paths: string[], settle?: Settle): SideEffect {
	const lookUp: SideEffect['lookUp'] = !settle
		? undefined
		: settle.by === 'resend'
			? (ctx, _i, ticket) => resendOnce(ctx, call, ticket, remoteIdPath, paths)
			: (ctx, _i, ticket) => lookUpOnce(ctx, call, settle.url, ticket, settle.rule, paths);
	return { inFlightMs: call.timeout, lookUpResends: settle?.by === 'resend', perform: (ctx, _i, ticket) => sendOnce(ctx, call, ticket, remoteIdPath, paths), lookUp };
}
