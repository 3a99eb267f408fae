import type { IDataObject, IExecuteFunctions, INodeExecutionData } from 'n8n-workflow';
import { NodeOperationError } from 'n8n-workflow';
import { jsonObject, jsonParam } from '../../params';
import { volatileFields, withoutDurableFields } from '../beginStep/payload';
import type { GatedPrepared } from '../gated/effect';
import { gatedOperation } from '../gated/operation';
import { prepareGated, wholeReceipt } from '../gated/prepare';
import { receiptPaths } from '../gated/receipt';
import { subworkflowEffect } from './effect';
import { workflowRef } from './workflow';

function executionIdOf(ctx: IExecuteFunctions): string | undefined {
	try {
		return String(ctx.getExecutionId() ?? '') || undefined;
	} catch {
		return undefined;
	}
}

/**
 * What the sub-workflow gets (before the ticket is added): the input item, or a custom input (after
 * Start Job, whose item holds only the job and its lease: the trigger's fields, for example); the
 * input item's binary data either way.
 */
function baseInput(ctx: IExecuteFunctions, i: number): INodeExecutionData {
	const item = ctx.getInputData()[i] ?? { json: {} };
	const json =
		ctx.getNodeParameter('inputSource', i, 'item') === 'custom'
			? jsonObject(jsonParam(ctx, 'subworkflowInput', i, 'Input (JSON)', {}), ctx, i, 'Input (JSON)')
			: item.json;
	return item.binary ? { json, binary: item.binary } : { json };
}

/**
 * What the ledger digests: by default the sub-workflow's input without Durable Step's fields (the
 * ticket, Start Job's lease), so a re-run of the same item is the same step; or a custom payload,
 * refused when it holds fields that change with every run.
 */
function payloadOf(ctx: IExecuteFunctions, i: number, input: IDataObject): IDataObject {
	if (ctx.getNodeParameter('payloadSource', i, 'item') !== 'custom') return withoutDurableFields(input);
	const payload = jsonParam(ctx, 'payload', i, 'Payload (JSON)', {}) as IDataObject;
	const volatile = volatileFields(payload, executionIdOf(ctx));
	if (volatile.length) {
		throw new NodeOperationError(ctx.getNode(), `The Payload holds ${volatile.join(', ')}, which change with every run: every re-run would be refused with digest_mismatch`, {
			itemIndex: i,
			description: 'Set Payload to "Input Item Without Durable Step Fields" (the default), or Payload (JSON) to the business fields only.',
		});
	}
	return payload;
}

/** Item i's sub-workflow (and lookup sub-workflow) and the begin that gates it. */
export function prepareSubworkflow(ctx: IExecuteFunctions, i: number): GatedPrepared {
	const ref = workflowRef(ctx, 'workflowId', i, 'Sub-Workflow');
	const remoteIdPath = String(ctx.getNodeParameter('remoteIdPath', i, 'id') ?? '').trim();
	const paths = receiptPaths(remoteIdPath, String(ctx.getNodeParameter('receiptFields', i, '') ?? ''), wholeReceipt(ctx));
	const lookUp = ctx.getNodeParameter('lookUp', i, false) === true ? workflowRef(ctx, 'lookUpWorkflowId', i, 'Lookup Sub-Workflow') : undefined;
	const base = baseInput(ctx, i);
	const window = Number((ctx.getNodeParameter('gateOptions', i, {}) as IDataObject).inFlightMs ?? 0);
	const effect = subworkflowEffect(base, ref, remoteIdPath, paths, lookUp, Number.isFinite(window) && window > 0 ? window : 0);
	return prepareGated(ctx, i, payloadOf(ctx, i, base.json), effect);
}

/**
 * Gated Sub-workflow: begins the step, runs the sub-workflow (any nodes: Postgres, Send Email,
 * Slack...) with the item and the step's ticket, records what it answered and routes Done / Done
 * Before / Attention. A sub-workflow that fails is an unknown outcome: the lookup sub-workflow (if
 * set) or the ledger's reconcile decides, it is never run again blindly.
 */
export const gatedSubworkflow = gatedOperation(prepareSubworkflow);
