import type { IDataObject, IExecuteFunctions } from 'n8n-workflow';
import { NodeOperationError } from 'n8n-workflow';
import { jsonParam } from '../../params';
import { volatileFields, withoutDurableFields } from '../beginStep/payload';
import type { GatedPrepared } from '../gated/effect';
import { gatedOperation } from '../gated/operation';
import { prepareGated } from '../gated/prepare';
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
 * What the ledger digests: by default the sub-workflow's input without Durable Step's fields (the
 * ticket, Start Job's lease), so a re-run of the same item is the same step; or a custom payload,
 * refused when it holds fields that change with every run.
 */
function payloadOf(ctx: IExecuteFunctions, i: number): IDataObject {
	if (ctx.getNodeParameter('payloadSource', i, 'item') !== 'custom') {
		return withoutDurableFields(ctx.getInputData()[i]?.json ?? {});
	}
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
	const paths = receiptPaths(remoteIdPath, String(ctx.getNodeParameter('receiptFields', i, '') ?? ''));
	const lookUp = ctx.getNodeParameter('lookUp', i, false) === true ? workflowRef(ctx, 'lookUpWorkflowId', i, 'Lookup Sub-Workflow') : undefined;
	return prepareGated(ctx, i, payloadOf(ctx, i), subworkflowEffect(ref, remoteIdPath, paths, lookUp));
}

/**
 * Gated Sub-workflow: begins the step, runs the sub-workflow (any nodes: Postgres, Send Email,
 * Slack...) with the item and the step's ticket, records what it answered and routes Done / Done
 * Before / Attention. A sub-workflow that fails is an unknown outcome: the lookup sub-workflow (if
 * set) or the ledger's reconcile decides, it is never run again blindly.
 */
export const gatedSubworkflow = gatedOperation(prepareSubworkflow);
