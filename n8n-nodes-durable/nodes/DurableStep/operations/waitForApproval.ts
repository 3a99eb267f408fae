import type { IDataObject, IExecuteFunctions, INodeExecutionData } from 'n8n-workflow';
import { NodeOperationError } from 'n8n-workflow';
import { fencingToken, requiredString } from '../params';
import { ledgerCall, operationPath } from '../transport';
import { PROCEED, type StepResult } from '../types';

const WAIT_NODE_TYPE = 'n8n-nodes-base.wait';

/**
 * The execution must park in a Wait node that the ledger can resume: "Resume: On Webhook Call"
 * with HTTP Method POST (the ledger POSTs {decision, reason, operation_key}). Checked before
 * registering, so a misconfigured workflow fails here, at the node to fix, instead of waiting
 * for a call that can never resume it.
 */
function checkWaitNodeFollows(ctx: IExecuteFunctions, i: number): void {
	const node = ctx.getNode();
	const children = ctx.getChildNodes(node.name, { includeNodeParameters: true });
	const waits = children.filter((c) => c.type === WAIT_NODE_TYPE && !c.disabled);
	const resumable = waits.filter(
		(c) => c.parameters?.resume === 'webhook' && (c.parameters?.httpMethod ?? 'GET') === 'POST',
	);
	if (resumable.length > 0) return;
	const found = waits.map((c) => `"${c.name}"`).join(', ');
	throw new NodeOperationError(node, 'No Wait node that the ledger can resume follows this node', {
		itemIndex: i,
		description: found
			? `Set ${found} to Resume: On Webhook Call with HTTP Method POST: the ledger POSTs the approver's decision to the execution's resume URL.`
			: 'Connect a Wait node after this node, set to Resume: On Webhook Call with HTTP Method POST, and connect its output back to the Begin Step that asked for the approval.',
	});
}

/**
 * Registers this execution's resume URL for an operation the gate halted with approval_required.
 * The items pass through unchanged (plus `durable.wait`); the Wait node after this one parks the
 * execution until the ledger calls the URL once the approver has decided.
 */
export async function waitForApproval(
	ctx: IExecuteFunctions,
	i: number,
	item: INodeExecutionData,
): Promise<StepResult> {
	const durable = (item.json.durable ?? {}) as IDataObject;
	if (typeof durable.reason === 'string' && durable.reason !== 'approval_required') {
		throw new NodeOperationError(ctx.getNode(), `This step stopped with "${durable.reason}", not approval_required`, {
			itemIndex: i,
			description:
				'Wait for Approval only follows a Begin Step that answered approval_required. Route other Needs Attention reasons (approval_denied, stale_fencing_token, ...) elsewhere, for example with an If node on {{ $json.durable.reason }}.',
		});
	}
	const key = requiredString(ctx, 'operationKey', i, 'Operation Key');
	const token = fencingToken(ctx, i);
	const resumeUrl = requiredString(ctx, 'resumeUrl', i, 'Resume URL');
	if (!/^https?:\/\//i.test(resumeUrl)) {
		throw new NodeOperationError(ctx.getNode(), '"Resume URL" must be an http(s) URL', {
			itemIndex: i,
			description: 'Keep the default {{ $execution.resumeUrl }}: the URL that resumes this execution from its Wait node.',
		});
	}
	checkWaitNodeFollows(ctx, i);

	const answer = await ledgerCall(
		ctx,
		'POST',
		operationPath(key, 'wait'),
		{ fencing_token: token, resume_url: resumeUrl },
		i,
		`Registering this execution to wait for the approval of ${key}`,
	);
	const wait = (answer.wait as IDataObject) ?? {};
	return {
		output: PROCEED,
		json: {
			...item.json,
			durable: {
				...durable,
				operation_key: key,
				waiting_for: 'approval',
				// Set when the approver decided before this execution got here: it is resumed at once.
				decision: (answer.decision as string | null) ?? null,
				wait,
			},
		},
	};
}
