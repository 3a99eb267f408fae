import type { IDataObject, IExecuteFunctions, INodeExecutionData } from 'n8n-workflow';
import { NodeOperationError } from 'n8n-workflow';
import { fencingToken, requiredString } from '../../params';
import { ledgerCall, operationPath } from '../../transport';
import { PROCEED, type DurableOperation, type StepResult } from '../../types';
import { LINK_EXPIRY_MAX_HOURS, approvalFields } from './request';
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

/** Link Expires After (hours) as the ledger's `link_expires_in_s`; undefined: the ledger's default. */
function linkExpiresInS(ctx: IExecuteFunctions, i: number): number | undefined {
	const options = (ctx.getNodeParameter('waitOptions', i, {}) ?? {}) as IDataObject;
	if (options.linkExpiresAfterHours === undefined || options.linkExpiresAfterHours === '') return undefined;
	const hours = Number(options.linkExpiresAfterHours);
	if (!Number.isFinite(hours) || hours < 1 || hours > LINK_EXPIRY_MAX_HOURS) {
		throw new NodeOperationError(ctx.getNode(), `"Link Expires After (Hours)" must be from 1 to ${LINK_EXPIRY_MAX_HOURS}, got ${JSON.stringify(options.linkExpiresAfterHours)}`, {
			itemIndex: i,
		});
	}
	return Math.round(hours * 3600);
}

/**
 * Registers this execution's resume URL for an operation the gate halted with approval_required.
 * The items pass through (plus `durable.wait`, `durable.approval_request` and `approval`: the
 * request to send with any n8n node placed before the Wait node); the Wait node downstream parks
 * the execution until the ledger calls the URL once the approvers have decided.
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
	const body: IDataObject = { fencing_token: token, resume_url: resumeUrl };
	const expiresInS = linkExpiresInS(ctx, i);
	if (expiresInS !== undefined) body.link_expires_in_s = expiresInS;

	const answer = await ledgerCall(
		ctx,
		'POST',
		operationPath(key, 'wait'),
		body,
		i,
		`Registering this execution to wait for the approval of ${key}`,
	);
	const wait = (answer.wait as IDataObject) ?? {};
	const request = answer.request && typeof answer.request === 'object' ? (answer.request as IDataObject) : undefined;
	return {
		output: PROCEED,
		json: {
			...item.json,
			// A ledger without approval requests (before issue 38) answers none: no field then.
			...(request ? { approval: approvalFields(request) } : {}),
			durable: {
				...durable,
				operation_key: key,
				waiting_for: 'approval',
				// Set when the approver decided before this execution got here: it is resumed at once.
				decision: (answer.decision as string | null) ?? null,
				wait,
				...(request ? { approval_request: request } : {}),
			},
		},
	};
}

export const waitForApproval: DurableOperation = { gate: false, start: async () => waitForApprovalItem };
