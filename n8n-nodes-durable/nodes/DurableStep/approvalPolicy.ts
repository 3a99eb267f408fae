import type { IDataObject, IExecuteFunctions, INodeProperties } from 'n8n-workflow';
import { NodeOperationError } from 'n8n-workflow';

/** The operations that begin a step, and so may name who approves it. */
const BEGIN_OPERATIONS = ['beginStep', 'gatedRequest', 'gatedSubworkflow'];

/**
 * Who may approve the step, sent as `approval_policy` with its begin. Left empty (the default)
 * nothing is sent: the begin body, and so every saved workflow, is what it was before (any
 * approver of the tenant approves). The ledger keeps the policy of the step's first begin.
 */
export const approvalPolicyField: INodeProperties = {
	displayName: 'Approval Policy',
	name: 'approvalPolicy',
	type: 'collection',
	placeholder: 'Add Rule',
	default: {},
	description:
		'Who may approve this step. A rule here makes the step need approval (as Requires Approval does). Empty: with Requires Approval, one approval by any approver of the tenant.',
	displayOptions: { show: { operation: BEGIN_OPERATIONS } },
	options: [
		{
			displayName: 'Approvals Needed',
			name: 'approvalsNeeded',
			type: 'number',
			default: 1,
			typeOptions: { minValue: 1, maxValue: 10, numberPrecision: 0 },
			description: 'How many distinct approvers must approve this exact request (N of the allowed approvers)',
		},
		{
			displayName: 'Approvers',
			name: 'approvers',
			type: 'string',
			default: '',
			placeholder: 'alice, bob, carol',
			description:
				'Comma-separated names of the approver tokens that may decide. Empty: any approver (of the groups below, if set).',
		},
		{
			displayName: 'Groups',
			name: 'groups',
			type: 'string',
			default: '',
			placeholder: 'editors, legal',
			description: 'Comma-separated groups whose approvers may decide. Empty: any group.',
		},
		{
			displayName: 'Requester May Approve',
			name: 'requesterMayApprove',
			type: 'boolean',
			default: true,
			description: 'Whether the identity that asked for the step (the runner token\'s name) may approve it too',
		},
	],
};

function names(value: unknown): string[] {
	if (Array.isArray(value)) return value.map((v) => String(v).trim()).filter(Boolean);
	return String(value ?? '')
		.split(',')
		.map((v) => v.trim())
		.filter(Boolean);
}

/**
 * Item i's `approval_policy`, or undefined when the collection is empty. A policy makes the step
 * approval-bound, as the ledger takes it (`approval_policy` implies `requires_approval`): the
 * caller sends `requires_approval: true` with it, whatever Requires Approval says.
 */
export function approvalPolicy(ctx: IExecuteFunctions, i: number): IDataObject | undefined {
	const set = (ctx.getNodeParameter('approvalPolicy', i, {}) ?? {}) as IDataObject;
	if (!Object.keys(set).length) return undefined;
	const policy: IDataObject = {};
	if (set.approvalsNeeded !== undefined) {
		const n = Number(set.approvalsNeeded);
		if (!Number.isInteger(n) || n < 1 || n > 10) {
			throw new NodeOperationError(ctx.getNode(), `"Approvals Needed" must be a whole number from 1 to 10, got ${JSON.stringify(set.approvalsNeeded)}`, {
				itemIndex: i,
			});
		}
		policy.approvals_needed = n;
	}
	if (set.approvers !== undefined) policy.approvers = names(set.approvers);
	if (set.groups !== undefined) policy.groups = names(set.groups);
	if (set.requesterMayApprove !== undefined) policy.requester_may_approve = set.requesterMayApprove !== false;
	return policy;
}
