import type { IDataObject, IExecuteFunctions, INodeExecutionData } from 'n8n-workflow';
import { NodeOperationError } from 'n8n-workflow';
import { fencingToken, requiredString } from '../../params';
import { ledgerCall, operationPath } from '../../transport';
import { PROCEED, type DurableOperation, type StepResult } from '../../types';
import { checkWaitNodeFollows } from './waitNode';

/**
 * Only approval_required parks the execution. Any other reason ends it here with the ledger's
 * reason and explanation, as Needs Attention does by default: in the loop Gated HTTP Request
 * (Attention) -> Wait for Approval -> Wait -> the same Gated HTTP Request, a denial comes back
 * on Attention after the resume and stops the execution with the approver's reason.
 */
function checkApprovalRequired(ctx: IExecuteFunctions, i: number, durable: IDataObject): void {
	if (typeof durable.reason === 'string' && durable.reason !== 'approval_required') {
		const step = typeof durable.action === 'string' && durable.action ? ` (step ${durable.action})` : '';
		throw new NodeOperationError(ctx.getNode(), `${durable.reason}: ${String(durable.explanation ?? '')}`, {
			itemIndex: i,
			description:
				`Wait for Approval parks only a step that answered approval_required; this one${step} stopped with "${durable.reason}", so the execution ends here. ` +
				'To handle other reasons in the workflow (approval_denied, stale_fencing_token, ...), route them elsewhere first, for example with an If node on {{ $json.durable.reason }}.',
		});
	}
}

function resumeUrlParam(ctx: IExecuteFunctions, i: number): string {
	const resumeUrl = requiredString(ctx, 'resumeUrl', i, 'Resume URL');
	if (!/^https?:\/\//i.test(resumeUrl)) {
		throw new NodeOperationError(ctx.getNode(), '"Resume URL" must be an http(s) URL', {
			itemIndex: i,
			description: 'Keep the default {{ $execution.resumeUrl }}: the URL that resumes this execution from its Wait node.',
		});
	}
	return resumeUrl;
}

/**
 * Registers this execution's resume URL for an operation the gate halted with approval_required.
 * The items pass through unchanged (plus `durable.wait`); the Wait node after this one parks the
 * execution until the ledger calls the URL once the approver has decided.
 */
export async function waitForApprovalItem(
	ctx: IExecuteFunctions,
	i: number,
	item: INodeExecutionData,
): Promise<StepResult> {
	const durable = (item.json.durable ?? {}) as IDataObject;
	checkApprovalRequired(ctx, i, durable);
	const key = requiredString(ctx, 'operationKey', i, 'Operation Key');
	const token = fencingToken(ctx, i);
	const resumeUrl = resumeUrlParam(ctx, i);
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

export const waitForApproval: DurableOperation = { gate: false, start: async () => waitForApprovalItem };
