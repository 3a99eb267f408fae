import type { IExecuteFunctions, NodeTypeAndVersion } from 'n8n-workflow';
import { NodeOperationError } from 'n8n-workflow';

const WAIT_NODE_TYPE = 'n8n-nodes-base.wait';

function resumable(node: NodeTypeAndVersion): boolean {
	return node.parameters?.resume === 'webhook' && (node.parameters?.httpMethod ?? 'GET') === 'POST';
}

/**
 * The execution must park in a Wait node that the ledger can resume: "Resume: On Webhook Call"
 * with HTTP Method POST (the ledger POSTs {decision, reason, operation_key, decided_by}). It may
 * be anywhere downstream, not only right after this node: the builder sends the approval request
 * with nodes of their own in between (Send Email, Slack...). n8n's getChildNodes lists every node
 * downstream, at any depth. Checked before registering, so a misconfigured workflow fails here,
 * at the node to fix, instead of waiting for a call that can never resume it.
 */
export function checkWaitNodeFollows(ctx: IExecuteFunctions, i: number): void {
	const node = ctx.getNode();
	const downstream = ctx.getChildNodes(node.name, { includeNodeParameters: true });
	const waits = downstream.filter((c) => c.type === WAIT_NODE_TYPE);
	if (waits.some((c) => !c.disabled && resumable(c))) return;
	const enabled = waits.filter((c) => !c.disabled);
	const disabled = waits.filter((c) => c.disabled);
	const quoted = (nodes: NodeTypeAndVersion[]) => nodes.map((c) => `"${c.name}"`).join(', ');
	let description =
		'Add a Wait node downstream of this node (after the node that sends the approval request, if any), set it to Resume: On Webhook Call with HTTP Method POST, and connect its output back to the step that asked for the approval.';
	if (enabled.length) {
		description = `Set ${quoted(enabled)} to Resume: On Webhook Call with HTTP Method POST: the ledger POSTs the approvers' decision to the execution's resume URL.`;
	} else if (disabled.length) {
		description = `${quoted(disabled)} downstream of this node is disabled: enable it (Resume: On Webhook Call, HTTP Method POST).`;
	}
	throw new NodeOperationError(node, 'No Wait node downstream of this node can be resumed by the ledger', {
		itemIndex: i,
		description,
	});
}
