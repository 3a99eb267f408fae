import type { IExecuteFunctions } from 'n8n-workflow';
import { NodeOperationError } from 'n8n-workflow';
import { requiredString } from '../../params';
import type { GatedPrepared } from '../gated/effect';
import { gatedOperation } from '../gated/operation';
import { prepareGated, wholeReceipt } from '../gated/prepare';
import { receiptPaths } from './answer';
import type { Settle } from './lookup';
import { digestPayload, explicitPayload, readCall, type HttpCall } from './request';
import { httpEffect } from './send';

const text = (ctx: IExecuteFunctions, name: string, i: number, fallback = '') =>
	String(ctx.getNodeParameter(name, i, fallback) ?? '').trim();

/**
 * How an unknown outcome of item i's request is settled: resent (the remote dedupes by the
 * idempotency header), looked up by the URL and its match rule, or not at all (review).
 */
function settleOf(ctx: IExecuteFunctions, i: number, call: HttpCall, remoteIdPath: string): Settle | undefined {
	if (ctx.getNodeParameter('remoteDedupes', i, false) === true) {
		if (!call.idempotencyHeader) {
			throw new NodeOperationError(ctx.getNode(), '"Remote Dedupes by Key" is on, but "Idempotency Header" is empty', {
				itemIndex: i,
				description: 'Set Gate Options > Idempotency Header to the header the remote dedupes by (usually Idempotency-Key), or turn the option off.',
			});
		}
		return { by: 'resend' };
	}
	if (ctx.getNodeParameter('lookUp', i, false) !== true) return undefined;
	const matchField = text(ctx, 'lookUpMatchField', i);
	if (!matchField) {
		throw new NodeOperationError(ctx.getNode(), '"Look Up Match Field" is empty: the lookup cannot tell this step\'s object from another', {
			itemIndex: i,
			description:
				'Name the field of the looked-up object that holds the step\'s key (for example idempotency_key or metadata.op_key), with Look Up Match Value the value it must have. An object counts as found only when it matches.',
		});
	}
	const rule = {
		matchField,
		matchValue: text(ctx, 'lookUpMatchValue', i, '{operation_key}') || '{operation_key}',
		idPath: text(ctx, 'lookUpRemoteIdPath', i) || remoteIdPath,
		listPath: text(ctx, 'lookUpListPath', i),
		emptyIsAbsent: ctx.getNodeParameter('lookUpEmptyIsAbsent', i, false) === true,
	};
	return { by: 'lookUp', url: requiredString(ctx, 'lookUpUrl', i, 'Look Up URL'), rule };
}

/** Item i's request and the begin that gates it (its payload is the request's digest input). */
export function prepareRequest(ctx: IExecuteFunctions, i: number): GatedPrepared {
	const call = readCall(ctx, i);
	const remoteIdPath = String(ctx.getNodeParameter('remoteIdPath', i, 'id') ?? '').trim();
	const paths = receiptPaths(remoteIdPath, String(ctx.getNodeParameter('receiptFields', i, '') ?? ''), wholeReceipt(ctx));
	const settle = settleOf(ctx, i, call, remoteIdPath);
	return prepareGated(ctx, i, explicitPayload(ctx, i) ?? digestPayload(call), httpEffect(call, remoteIdPath, paths, settle));
}

/**
 * Gated HTTP Request: begins the step, sends the request itself (the operation key in the
 * idempotency header), records the outcome and routes Done / Done Before / Attention. An unknown
 * outcome is looked up (Look Up URL) or reconciled by the ledger, never resent blindly.
 */
export const gatedRequest = gatedOperation(prepareRequest);
