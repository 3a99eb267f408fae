import type { IDataObject, IExecuteFunctions } from 'n8n-workflow';
import { approvalPolicy } from '../../approvalPolicy';
import { itemJob } from '../../jobOfItem';
import { optionalString, requiredString } from '../../params';
import { beginPayload } from './payload';

/** One item's begin: what identifies the step on its outputs, and the body sent to the ledger. */
export interface BeginRequest {
	jobId: string;
	action: string;
	token: number;
	body: IDataObject;
}

/** An item's begin plus its options for a `reconcile` answer. */
export interface Prepared {
	req: BeginRequest;
	operationKey: string | undefined;
	autoReconcile: boolean;
	lookUp: boolean;
}

/** Reads and checks one item's parameters; throws NodeOperationError for a bad one. */
export function prepare(ctx: IExecuteFunctions, i: number): Prepared {
	const { jobId, token } = itemJob(ctx, i);
	const action = requiredString(ctx, 'action', i, 'Action');
	const payload = beginPayload(ctx, i);
	const options = ctx.getNodeParameter('beginOptions', i, {}) as IDataObject;

	const body: IDataObject = {
		job_id: jobId,
		action,
		payload: payload as IDataObject,
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
		lookUp: options.routeToLookUp === true,
	};
}
