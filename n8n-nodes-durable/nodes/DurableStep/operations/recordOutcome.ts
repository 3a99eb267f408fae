import type { IDataObject, IExecuteFunctions, INodeExecutionData } from 'n8n-workflow';
import { NodeOperationError } from 'n8n-workflow';
import { readSideEffectFailure } from '../classify';
import { fencingToken, jsonParam, optionalString, requiredString } from '../params';
import { ledgerCall, operationPath } from '../transport';
import { DONE, NEEDS_ATTENTION, PROCEED, type StepResult } from '../types';

function asReceipt(value: unknown): IDataObject {
	if (value && typeof value === 'object' && !Array.isArray(value)) return value as IDataObject;
	if (value === undefined || value === null || value === '') return {};
	return { value: value as IDataObject[keyof IDataObject] };
}

export async function recordOutcome(
	ctx: IExecuteFunctions,
	i: number,
	item: INodeExecutionData,
): Promise<StepResult> {
	const key = requiredString(ctx, 'operationKey', i, 'Operation Key');
	const token = fencingToken(ctx, i);
	const outcome = ctx.getNodeParameter('outcome', i, 'auto') as string;
	const what = `Recording the outcome of ${key}`;

	let verb: string;
	let body: IDataObject;
	let failure = null;
	if (outcome === 'auto') failure = readSideEffectFailure(item);

	if (outcome === 'confirm' || (outcome === 'auto' && failure === null)) {
		verb = 'confirm';
		const remoteId = optionalString(ctx.getNodeParameter('remoteId', i, ''));
		if (!remoteId) {
			throw new NodeOperationError(ctx.getNode(), '"Remote ID" is empty, so the step cannot be confirmed', {
				itemIndex: i,
				description:
					'The ledger stores the remote ID as proof and hands it to later runs (Already Done). Set "Remote ID" to the ID the side effect returned (default {{ $json.id }}); for a side effect that creates nothing, use any stable reference, for example the message ID or {{ $(\'Begin Step\').item.json.durable.operation_key }}.',
			});
		}
		body = {
			fencing_token: token,
			remote_id: remoteId,
			receipt: asReceipt(jsonParam(ctx, 'receipt', i, 'Receipt', {})),
		};
	} else if (outcome === 'fail') {
		verb = 'fail';
		body = {
			fencing_token: token,
			retryable: ctx.getNodeParameter('retryable', i, true) as boolean,
			error: { message: ctx.getNodeParameter('errorMessage', i, '') as string },
		};
	} else if (outcome === 'unknown') {
		verb = 'unknown';
		body = { fencing_token: token, error: { message: ctx.getNodeParameter('errorMessage', i, '') as string } };
	} else if (failure && failure.errorKind === 'connection_refused') {
		// The connection was never established: nothing reached the remote, a retry is safe.
		verb = 'fail';
		body = { fencing_token: token, retryable: true, error: { message: failure.message, kind: 'connection_refused' } };
	} else if (failure) {
		// The ledger classifies (DESIGN.md): 400/422 fail retryable, 401/403 fail + halt job,
		// timeout / reset / 5xx / 409 unknown.
		verb = 'outcome';
		body = {
			fencing_token: token,
			http_status: failure.httpStatus,
			error_kind: failure.errorKind,
			error: { http_status: failure.httpStatus, message: failure.message },
		};
	} else {
		throw new NodeOperationError(ctx.getNode(), `Unsupported outcome "${outcome}"`, {
			itemIndex: i,
			description: 'Choose Auto, Confirm, Fail or Unknown.',
		});
	}

	const answer = await ledgerCall(ctx, 'POST', operationPath(key, verb), body, i, what);
	const operation = (answer.operation as IDataObject) ?? {};
	const state = (operation.state as string) ?? null;
	// The same keys as Begin Step's Already Done item, so both paths can join one node that
	// reads $json.durable.remote_id / receipt.
	const durable: IDataObject = {
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
	if (failure) durable.side_effect_error = { ...failure };
	if (answer.classification) durable.classification = answer.classification;
	const json = { ...item.json, durable };
	if (Number(ctx.getNode().typeVersion ?? 1) < 1.1) return { output: PROCEED, json };
	if (state === 'CONFIRMED') return { output: DONE, json };
	const reason = notDoneReason(operation, String(answer.classification ?? verb));
	durable.reason = reason;
	durable.explanation = NOT_DONE[reason];
	return { output: NEEDS_ATTENTION, json };
}

const NOT_DONE: Record<string, string> = {
	failed:
		'The side effect failed and the ledger recorded that nothing was written; the next run of this workflow tries it again (the gate counts the attempts).',
	failed_permanently: 'The side effect failed with an error that retrying cannot fix; the step will not be tried again.',
	authorization_revoked:
		'The remote system refused the credentials (401/403); the job is halted until they are fixed. Nothing will be retried automatically.',
	outcome_unknown:
		'The side effect was sent but its result is unknown (timeout, connection reset, 5xx). The next run reconciles it before anything is repeated (Look Up, or the review queue).',
};

function notDoneReason(operation: IDataObject, classification: string): string {
	if (operation.state === 'UNKNOWN' || operation.state === 'SENT') return 'outcome_unknown';
	if (classification === 'fail_halt') return 'authorization_revoked';
	return operation.retryable === false ? 'failed_permanently' : 'failed';
}
