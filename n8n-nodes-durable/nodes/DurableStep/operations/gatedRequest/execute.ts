import type { IExecuteFunctions } from 'n8n-workflow';
import { requiredString } from '../../params';
import type { GatedPrepared } from '../gated/effect';
import { gatedOperation } from '../gated/operation';
import { prepareGated } from '../gated/prepare';
import { receiptPaths } from './answer';
import { digestPayload, explicitPayload, readCall } from './request';
import { httpEffect } from './send';

/** Item i's request and the begin that gates it (its payload is the request's digest input). */
export function prepareRequest(ctx: IExecuteFunctions, i: number): GatedPrepared {
	const call = readCall(ctx, i);
	const remoteIdPath = String(ctx.getNodeParameter('remoteIdPath', i, 'id') ?? '').trim();
	const paths = receiptPaths(remoteIdPath, String(ctx.getNodeParameter('receiptFields', i, '') ?? ''));
	const lookUp =
		ctx.getNodeParameter('lookUp', i, false) === true
			? {
					url: requiredString(ctx, 'lookUpUrl', i, 'Look Up URL'),
					idPath: String(ctx.getNodeParameter('lookUpRemoteIdPath', i, '') ?? '').trim() || remoteIdPath,
				}
			: undefined;
	return prepareGated(ctx, i, explicitPayload(ctx, i) ?? digestPayload(call), httpEffect(call, remoteIdPath, paths, lookUp));
}

/**
 * Gated HTTP Request: begins the step, sends the request itself (the operation key in the
 * idempotency header), records the outcome and routes Done / Done Before / Attention. An unknown
 * outcome is looked up (Look Up URL) or reconciled by the ledger, never resent blindly.
 */
export const gatedRequest = gatedOperation(prepareRequest);
