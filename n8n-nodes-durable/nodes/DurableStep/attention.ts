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

/**
 * Reasons a lookup settles by itself: the attempt's outcome is unknown (or another execution's
 * request may still land), and the node's Look Up (or a remote that dedupes by the key) asks the
 * remote on the next run, Retry On Fail's next try or n8n's Retry. No one has to act.
 */
const SETTLED_BY_LOOKUP: Readonly<Record<string, string>> = {
	outcome_unknown:
		'The side effect was sent but its result is unknown (timeout, connection reset, 5xx). Nothing was repeated.',
	lookup_failed:
		'The side effect was sent but its result is unknown, and the lookup that would settle it got no answer. Nothing was repeated.',
	in_flight_lookup:
		'Another execution sent this step moments ago and its request may still land, so a lookup that finds nothing proves nothing yet. Nothing was sent.',
};

/** Whether this gated node looks unknown outcomes up itself (Look Up, or Remote Dedupes by Key). */
export function looksUp(ctx: IExecuteFunctions, i: number): boolean {
	const operation = String(ctx.getNodeParameter('operation', i, ''));
	if (operation !== 'gatedRequest' && operation !== 'gatedSubworkflow') return false;
	const on = (name: string) => {
		try {
			return ctx.getNodeParameter(name, i, false) === true;
		} catch {
			return false;
		}
	};
	return on('lookUp') || (operation === 'gatedRequest' && on('remoteDedupes'));
}

/** The failure of a step the next run's lookup settles: no review queue, no one to call. */
function settlesItself(ctx: IExecuteFunctions, i: number, durable: IDataObject, baseUrl: string): NodeOperationError {
	const reason = String(durable.reason);
	const job = typeof durable.job_id === 'string' && durable.job_id ? durable.job_id : '';
	const timeline = `${baseUrl.replace(/\/+$/, '')}/console/jobs${job ? `/${encodeURIComponent(job)}` : ''}`;
	return new NodeOperationError(ctx.getNode(), `${reason}: ${SETTLED_BY_LOOKUP[reason]}`, {
		itemIndex: i,
		description:
			'No one needs to act: this node looks the step up by itself. The next run of this workflow (a re-run, ' +
			"n8n's Retry, the next try of Retry On Fail) asks the remote first: Done Before when it has the object, " +
			`sent again only when it provably has none. The job's timeline: ${timeline}.`,
	});
}

/** The error that fails the execution for an item that would have gone to Needs Attention. */
export function attentionError(
	ctx: IExecuteFunctions,
	i: number,
	durable: IDataObject,
	baseUrl: string,
): NodeOperationError {
	const reason = String(durable.reason ?? 'needs_attention');
	if (reason in SETTLED_BY_LOOKUP && looksUp(ctx, i)) return settlesItself(ctx, i, durable, baseUrl);
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
