import type { IExecuteFunctions } from 'n8n-workflow';
import { NodeOperationError } from 'n8n-workflow';

const WAIT_NODE_TYPE = 'n8n-nodes-base.wait';

/**
 * The execution must park in a Wait node that the ledger can resume: "Resume: On Webhook Call"
 * with HTTP Method POST (the ledger POSTs {decision, reason, operation_key}). Checked before
 * registering, so a misconfigured workflow fails here, at the node to fix, instead of waiting
 * for a call that can never resume it.
 */
export function checkWaitNodeFollows(ctx: IExecuteFunctions, i: number): void {
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
