import type { IDataObject, IExecuteFunctions, INodeExecutionData } from 'n8n-workflow';
import { NodeOperationError } from 'n8n-workflow';
import { readSideEffectFailure } from '../classify';
import { fencingToken, jsonParam, optionalString, requiredString } from '../params';
import { ledgerCall, operationPath } from '../transport';
import { PROCEED, type StepResult } from '../types';

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
	const durable: IDataObject = {
		operation_key: key,
		recorded: verb,
		state: operation.state ?? null,
		remote_id: operation.remote_id ?? null,
		operation,
	};
	if (failure) durable.side_effect_error = { ...failure };
	return { output: PROCEED, json: { ...item.json, durable } };
}
