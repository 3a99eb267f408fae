import type { IDataObject, IExecuteFunctions } from 'n8n-workflow';
import { approvalPolicy } from '../../approvalPolicy';
import { EDITOR_DEFAULTS_FROM } from '../../editorDefaults';
import { itemJob } from '../../jobOfItem';
import { optionalString, requiredString } from '../../params';
import type { GatedPrepared, SideEffect } from './effect';

/**
 * Item i's begin for a one-node operation: Begin Step's body (job, action, payload, token,
 * approval, key, target) from the shared fields and Gate Options, with the side effect to run.
 */
export function prepareGated(ctx: IExecuteFunctions, i: number, payload: IDataObject, effect: SideEffect): GatedPrepared {
	const { jobId, token } = itemJob(ctx, i);
	const action = requiredString(ctx, 'action', i, 'Action');
	const options = ctx.getNodeParameter('gateOptions', i, {}) as IDataObject;
	const body: IDataObject = {
		job_id: jobId,
		action,
		payload,
		fencing_token: token,
		requires_approval: options.requiresApproval === true,
	};
	const operationKey = optionalString(options.operationKey);
	if (operationKey) body.operation_key = operationKey;
	const target = optionalString(options.target);
	if (target) body.target = target;
	const policy = approvalPolicy(ctx, i);
	if (policy) Object.assign(body, { requires_approval: true, approval_policy: policy });
	return {
		req: { jobId, action, token, body },
		operationKey,
		autoReconcile: options.autoReconcile !== false,
		lookUp: effect.lookUp !== undefined,
		effect,
	};
}

/** Node 1.5: with Receipt Fields empty the receipt is the whole answer (Done Before = Done's fields). */
export function wholeReceipt(ctx: IExecuteFunctions): boolean {
	return Number(ctx.getNode().typeVersion ?? 1) >= EDITOR_DEFAULTS_FROM;
}
