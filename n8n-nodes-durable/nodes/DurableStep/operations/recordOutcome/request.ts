import type { IDataObject, IExecuteFunctions, INodeExecutionData } from 'n8n-workflow';
import { NodeOperationError } from 'n8n-workflow';
import { asReceipt, jsonParam, optionalString } from '../../params';
import { readSideEffectFailure, type SideEffectFailure } from './classify';

/** What Record Outcome sends: `POST /v1/operations/{key}/{verb}` with this body. */
export interface OutcomeRequest {
	verb: string;
	body: IDataObject;
	/** Auto only: the failure read from the incoming error item. */
	failure: SideEffectFailure | null;
}

function confirmBody(ctx: IExecuteFunctions, i: number, token: number): IDataObject {
	const remoteId = optionalString(ctx.getNodeParameter('remoteId', i, ''));
	if (!remoteId) {
		throw new NodeOperationError(ctx.getNode(), '"Remote ID" is empty, so the step cannot be confirmed', {
			itemIndex: i,
			description:
				'The ledger stores the remote ID as proof and hands it to later runs (Already Done). Set "Remote ID" to the ID the side effect returned (default {{ $json.id }}); for a side effect that creates nothing, use any stable reference, for example the message ID or {{ $(\'Begin Step\').item.json.durable.operation_key }}.',
		});
	}
	return { fencing_token: token, remote_id: remoteId, receipt: asReceipt(jsonParam(ctx, 'receipt', i, 'Receipt', {})) };
}

/** Auto on an error item: the facts go to the ledger, which classifies them. */
export function failureRequest(failure: SideEffectFailure, token: number): OutcomeRequest {
	if (failure.errorKind === 'connection_refused') {
		// The connection was never established: nothing reached the remote, a retry is safe.
		const body = { fencing_token: token, retryable: true, error: { message: failure.message, kind: 'connection_refused' } };
		return { verb: 'fail', body, failure };
	}
	// The ledger classifies (docs/api.md#operations-the-gate): 400/422 fail retryable,
	// 401/403 fail + halt job, timeout / reset / 5xx / 409 unknown.
	const body = {
		fencing_token: token,
		http_status: failure.httpStatus,
		error_kind: failure.errorKind,
		error: { http_status: failure.httpStatus, message: failure.message },
	};
	return { verb: 'outcome', body, failure };
}

/** Reads the Outcome field (and for Auto the incoming item) into the request to send. */
export function outcomeRequest(
	ctx: IExecuteFunctions,
	i: number,
	item: INodeExecutionData,
	token: number,
): OutcomeRequest {
	const outcome = ctx.getNodeParameter('outcome', i, 'auto') as string;
	const failure = outcome === 'auto' ? readSideEffectFailure(item) : null;
	if (outcome === 'confirm' || (outcome === 'auto' && failure === null)) {
		return { verb: 'confirm', body: confirmBody(ctx, i, token), failure };
	}
	const errorMessage = () => ctx.getNodeParameter('errorMessage', i, '') as string;
	if (outcome === 'fail') {
		const retryable = ctx.getNodeParameter('retryable', i, true) as boolean;
		return { verb: 'fail', body: { fencing_token: token, retryable, error: { message: errorMessage() } }, failure };
	}
	if (outcome === 'unknown') {
		return { verb: 'unknown', body: { fencing_token: token, error: { message: errorMessage() } }, failure };
	}
	if (failure) return failureRequest(failure, token);
	throw new NodeOperationError(ctx.getNode(), `Unsupported outcome "${outcome}"`, {
		itemIndex: i,
		description: 'Choose Auto, Confirm, Fail or Unknown.',
	});
}
