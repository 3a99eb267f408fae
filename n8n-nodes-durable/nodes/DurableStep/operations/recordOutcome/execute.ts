import type { IDataObject, IExecuteFunctions, INodeExecutionData } from 'n8n-workflow';
import { fencingToken, requiredString } from '../../params';
import { explainOwn } from '../../reasons';
import { ledgerCall, operationPath } from '../../transport';
import { DONE, NEEDS_ATTENTION, PROCEED, type DurableOperation, type StepResult } from '../../types';
import { outcomeRequest } from './request';

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

/** Confirm / fail / unknown / outcome for one step; 1.1 routes Done or Needs Attention. */
export async function recordOutcomeItem(
	ctx: IExecuteFunctions,
	i: number,
	item: INodeExecutionData,
): Promise<StepResult> {
	const key = requiredString(ctx, 'operationKey', i, 'Operation Key');
	const token = fencingToken(ctx, i);
	const { verb, body, failure } = outcomeRequest(ctx, i, item, token);

	const answer = await ledgerCall(ctx, 'POST', operationPath(key, verb), body, i, `Recording the outcome of ${key}`);
	const operation = (answer.operation as IDataObject) ?? {};
	const durable = recordedDurable(verb, key, token, operation);
	if (failure) durable.side_effect_error = { ...failure };
	if (answer.classification) durable.classification = answer.classification;
	const json = { ...item.json, durable };
	if (Number(ctx.getNode().typeVersion ?? 1) < 1.1) return { output: PROCEED, json };
	if (durable.state === 'CONFIRMED') return { output: DONE, json };
	const reason = notDoneReason(operation, String(answer.classification ?? verb));
	durable.reason = reason;
	durable.explanation = explainOwn(reason);
	return { output: NEEDS_ATTENTION, json };
}

export const recordOutcome: DurableOperation = { gate: false, start: async () => recordOutcomeItem };
