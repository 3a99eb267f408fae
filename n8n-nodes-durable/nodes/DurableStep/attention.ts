import type { IDataObject, IExecuteFunctions, INodeProperties } from 'n8n-workflow';
import { NodeOperationError } from 'n8n-workflow';

/**
 * Version 1.2: an item for Needs Attention fails the execution unless the builder asked for the
 * output. An unwired Needs Attention output made refused and needs_review runs look like green
 * "Succeeded" executions; a failed execution is red in n8n and runs the error workflow.
 */
export const ATTENTION_VERSION = 1.2;

/** The operations that have a Needs Attention output. */
export const ATTENTION_OPERATIONS = ['beginStep', 'reportLookup', 'recordOutcome', 'gatedRequest', 'gatedSubworkflow'];

export const needsAttentionField: INodeProperties = {
	displayName: 'Needs Attention',
	name: 'needsAttention',
	type: 'options',
	options: [
		{
			name: 'Fail the Execution',
			value: 'fail',
			description:
				'Stop with the reason and the ledger console page: n8n shows the execution as failed and runs the error workflow',
		},
		{
			name: 'Route to an Output',
			value: 'route',
			description:
				'Add an Attention output and send such items there, to handle them in this workflow (Wait for Approval, a notification)',
		},
	],
	default: 'fail',
	description: 'What happens when the ledger stops a step (approval required, needs review, refused, failed)',
	displayOptions: { show: { operation: ATTENTION_OPERATIONS, '@version': [{ _cnd: { gte: ATTENTION_VERSION } }] } },
};

/** Whether this node puts Needs Attention items on an output (always before version 1.2). */
export function routesAttention(ctx: IExecuteFunctions, operation: string): boolean {
	const version = Number(ctx.getNode().typeVersion ?? 1);
	if (version < ATTENTION_VERSION || !ATTENTION_OPERATIONS.includes(operation)) return true;
	return ctx.getNodeParameter('needsAttention', 0, 'fail') === 'route';
}

const REVIEW_REASONS = new Set(['needs_review', 'awaiting_editor', 'outcome_unknown', 'in_flight', 'reconcile_failed']);
const APPROVAL_REASONS = new Set(['approval_required', 'approval_denied']);

/** The console page where a person acts on this reason, and who may open it. */
export function consolePage(baseUrl: string, durable: IDataObject): { url: string; who: string } {
	const root = `${baseUrl.replace(/\/+$/, '')}/console`;
	const reason = String(durable.reason ?? '');
	const key = typeof durable.operation_key === 'string' ? durable.operation_key : '';
	if (REVIEW_REASONS.has(reason)) return { url: `${root}/review`, who: 'an editor' };
	if (APPROVAL_REASONS.has(reason) && key) {
		return { url: `${root}/approvals/${encodeURIComponent(key)}`, who: 'an approver' };
	}
	const job = typeof durable.job_id === 'string' && durable.job_id ? `/jobs/${encodeURIComponent(durable.job_id)}` : '/jobs';
	return { url: `${root}${job}`, who: 'an editor, approver or admin' };
}

/** The error that fails the execution for an item that would have gone to Needs Attention. */
export function attentionError(
	ctx: IExecuteFunctions,
	i: number,
	durable: IDataObject,
	baseUrl: string,
): NodeOperationError {
	const reason = String(durable.reason ?? 'needs_attention');
	const page = consolePage(baseUrl, durable);
	const step = [durable.action, durable.job_id].every((v) => typeof v === 'string' && v)
		? ` (step ${String(durable.action)} of job ${String(durable.job_id)})`
		: '';
	return new NodeOperationError(ctx.getNode(), `${reason}: ${String(durable.explanation ?? '')}`, {
		itemIndex: i,
		description:
			`Ledger console${step}: ${page.url} (sign in as ${page.who}). ` +
			(durable.decision === 'recorded' ? 'The outcome is recorded in the ledger. ' : 'This run sent nothing for this item. ') +
			'To handle this case in the workflow instead (Wait for Approval, a notification), set "Needs Attention" to "Route to an Output" and connect the Attention output.',
	});
}
