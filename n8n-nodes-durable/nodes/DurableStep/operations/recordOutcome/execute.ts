import type { IDataObject, IExecuteFunctions, INodeExecutionData } from 'n8n-workflow';
import { fencingToken, requiredString } from '../../params';
import { explainOwn } from '../../reasons';
import { EDITOR_DEFAULTS_FROM } from '../../editorDefaults';
import { HANDOVER_S, holderOf, noteCarried, sendCarrying } from '../../liveness';
import { ledgerRequest, operationPath, refusalError, type LedgerAnswer, type LedgerRefusal } from '../../transport';
import { DONE, NEEDS_ATTENTION, PROCEED, type DurableOperation, type StepResult } from '../../types';
import { outcomeRequest, type OutcomeRequest } from './request';

/** Why a recorded step is not done (the ledger's outcome answer carries no reason of its own). */
function notDoneReason(operation: IDataObject, classification: string): string {
	if (operation.state === 'UNKNOWN' || operation.state === 'SENT') return 'outcome_unknown';
	if (classification === 'fail_halt') return 'authorization_revoked';
	return operation.retryable === false ? 'failed_permanently' : 'failed';
}

/**
 * The same keys as Begin Step's Already Done item, so both paths can join one node that reads
 * $json.durable.remote_id / receipt.
 */
function recordedDurable(verb: string, key: string, token: number, operation: IDataObject): IDataObject {
	const state = (operation.state as string) ?? null;
	return {
		decision: 'recorded',
		recorded: verb,
		job_id: operation.job_id ?? null,
		action: operation.action ?? null,
		operation_key: key,
		fencing_token: token,
		state,
		attempt: operation.attempt ?? null,
		remote_id: operation.remote_id ?? null,
		receipt: state === 'CONFIRMED' ? { remote_id: operation.remote_id ?? null, ...((operation.receipt as IDataObject) ?? {}) } : null,
		operation,
	};
}

/**
 * A fenced-out execution's outcome (409 stale_fencing_token): another execution took the job over
 * while this one was writing. The ledger keeps the receipt as evidence (details.receipt_kept) for
 * the new owner's reconciliation or the review queue; this execution stops on Needs Attention.
 */
function staleAttention(item: INodeExecutionData, verb: string, key: string, token: number, refusal: LedgerRefusal): StepResult {
	const details = refusal.details ?? {};
	const durable = recordedDurable(verb, key, token, { state: details.state ?? null, operation_key: key });
	durable.reason = refusal.code;
	durable.receipt_kept = details.receipt_kept === true;
	durable.candidate_remote_id = (details.remote_id as string) ?? null;
	durable.details = details;
	const kept = durable.receipt_kept
		? ' Its result was kept as evidence: the newer execution\'s reconciliation (or an editor, in the review queue) settles the step with it; nothing is repeated.'
		: '';
	durable.explanation = `${explainOwn(refusal.code, refusal.message)}${kept}`;
	return { output: NEEDS_ATTENTION, json: { ...item.json, durable } };
}

/**
 * The outcome's request. ``handover`` (the holder's owner: Record Outcome 1.5, a one-item gated step): a confirm carries
 * the holder's HANDOVER_S heartbeat, so that the beat after the node (router.ts) is not sent.
 */
async function send(
	ctx: IExecuteFunctions,
	i: number,
	key: string,
	token: number,
	verb: string,
	body: IDataObject,
	handover: string | undefined,
): Promise<LedgerAnswer> {
	if (handover === undefined || verb !== 'confirm') return await ledgerRequest(ctx, 'POST', operationPath(key, verb), body, i);
	const { sent, held } = await sendCarrying(ctx, operationPath(key, verb), body, handover, HANDOVER_S, i);
	if ('unreachable' in sent) throw sent.unreachable(i);
	const operation = sent.answer.ok ? ((sent.answer.body.operation as IDataObject) ?? {}) : {};
	if (held && typeof operation.job_id === 'string') noteCarried(ctx, operation.job_id, token, HANDOVER_S);
	return sent.answer;
}

/**
 * Sends one step's outcome (`POST /v1/operations/{key}/{verb}`) and routes the answer: Done for a
 * confirmed step, Needs Attention otherwise (1.1 and later; version 1 answers on Proceed). Record
 * Outcome and the one-node operations (operations/gated) share it, so an outcome is read the same
 * way whichever node reported it.
 */
export async function recordAndRoute(
	ctx: IExecuteFunctions,
	i: number,
	item: INodeExecutionData,
	key: string,
	token: number,
	{ verb, body, failure }: OutcomeRequest,
	handover?: string,
): Promise<StepResult> {
	const v11 = Number(ctx.getNode().typeVersion ?? 1) >= 1.1;
	const sent = await send(ctx, i, key, token, verb, body, handover);
	if (!sent.ok) {
		if (v11 && sent.refusal.code === 'stale_fencing_token') return staleAttention(item, verb, key, token, sent.refusal);
		throw refusalError(ctx, sent.refusal, i, `Recording the outcome of ${key}`);
	}
	const answer = sent.body;
	const operation = (answer.operation as IDataObject) ?? {};
	const durable = recordedDurable(verb, key, token, operation);
	if (failure) durable.side_effect_error = { ...failure };
	if (answer.classification) durable.classification = answer.classification;
	const json = { ...item.json, durable };
	if (!v11) return { output: PROCEED, json };
	if (answer.reason === 'execution_mismatch') {
		// Another execution began this attempt (n8n's Retry of a crashed execution is a new one):
		// the ledger kept this result as evidence and sent the step to reconciliation.
		durable.reason = 'execution_mismatch';
		durable.explanation = explainOwn('execution_mismatch', answer.message);
		durable.attempt_binding = (answer.attempt_binding as IDataObject) ?? null;
		return { output: NEEDS_ATTENTION, json };
	}
	if (durable.state === 'CONFIRMED') return { output: DONE, json };
	const reason = notDoneReason(operation, String(answer.classification ?? verb));
	durable.reason = reason;
	durable.explanation = explainOwn(reason);
	return { output: NEEDS_ATTENTION, json };
}

/** Confirm / fail / unknown / outcome for one step; 1.1 routes Done or Needs Attention. */
export async function recordOutcomeItem(
	ctx: IExecuteFunctions,
	i: number,
	item: INodeExecutionData,
): Promise<StepResult> {
	const key = requiredString(ctx, 'operationKey', i, 'Operation Key');
	const token = fencingToken(ctx, i);
	const request = outcomeRequest(ctx, i, item, token);
	const handover =
		Number(ctx.getNode().typeVersion ?? 1) >= EDITOR_DEFAULTS_FROM ? holderOf(ctx, item.json, '', token).owner : undefined;
	return recordAndRoute(ctx, i, item, key, token, request, handover);
}

export const recordOutcome: DurableOperation = { gate: false, start: async () => recordOutcomeItem };
