import type { IDataObject, IExecuteFunctions, INodeExecutionData } from 'n8n-workflow';
import { fencingToken, jsonParam, optionalString, requiredString } from '../params';
import type { LedgerRefusal } from '../transport';
import { ledgerRequest, operationPath, refusalError } from '../transport';
import { ALREADY_DONE, NEEDS_ATTENTION, PROCEED, type StepResult } from '../types';

/** Human-readable explanations for the Needs Attention reason codes. */
const EXPLANATIONS: Record<string, string> = {
	outcome_unknown:
		'An earlier attempt of this step was sent, but whether it took effect is unknown and the ledger could not prove it either way. Nothing was repeated. Check the remote system and resolve the operation in the review queue, then run the workflow again.',
	needs_review:
		'An earlier attempt of this step could not be reconciled automatically; it waits for an editor decision in the review queue. Nothing was repeated.',
	digest_mismatch:
		'This step was already begun with a different payload. Either the content really changed (bump the job task version) or the payload expression is not deterministic (timestamps, random IDs): make it stable.',
	stale_fencing_token:
		"Another execution took over this job's lease after this one started. This execution must stop; the newer one continues.",
	approval_required: 'The step needs an approval of this exact payload by an approver before it may run.',
	cancelled: 'The job was cancelled; no further side effects are allowed.',
	authorization_revoked:
		'An earlier step was refused with 401/403 by the remote system, so the job was halted. Fix the credentials, then resume the job.',
	abandoned: 'An editor decided this step must not be done.',
	attempts_exhausted: 'The step failed and its retry budget is used up.',
	budget_exhausted: "The job's budget is used up.",
};

function explain(reason: string, ledgerMessage: unknown): string {
	const base = EXPLANATIONS[reason];
	const fromLedger = typeof ledgerMessage === 'string' && ledgerMessage ? ledgerMessage : '';
	if (base && fromLedger) return `${base} (ledger: ${fromLedger})`;
	return base || fromLedger || `The ledger stopped this step (${reason}).`;
}

interface BeginRequest {
	jobId: string;
	action: string;
	token: number;
	body: IDataObject;
}

function attention(
	item: INodeExecutionData,
	req: BeginRequest,
	decision: string,
	reason: string,
	message: unknown,
	operation: IDataObject | undefined,
	extra: IDataObject = {},
): StepResult {
	return {
		output: NEEDS_ATTENTION,
		json: {
			...item.json,
			durable: {
				decision,
				reason,
				explanation: explain(reason, message),
				job_id: req.jobId,
				action: req.action,
				operation_key: (operation?.operation_key as string) ?? (req.body.operation_key as string) ?? null,
				state: (operation?.state as string) ?? null,
				fencing_token: req.token,
				operation: operation ?? null,
				...extra,
			},
		},
	};
}

function refusalToAttention(item: INodeExecutionData, req: BeginRequest, refusal: LedgerRefusal): StepResult {
	return attention(item, req, 'refused', refusal.code, refusal.message, undefined, {
		http_status: refusal.status,
		details: refusal.details,
	});
}

/** Maps a begin answer to an output. Returns null for `reconcile` so the caller may reconcile. */
function route(item: INodeExecutionData, req: BeginRequest, answer: IDataObject): StepResult | null {
	const decision = String(answer.decision);
	const operation = (answer.operation as IDataObject) ?? {};
	const durable: IDataObject = {
		decision,
		job_id: req.jobId,
		action: req.action,
		operation_key: operation.operation_key,
		fencing_token: req.token,
		state: operation.state,
		attempt: operation.attempt,
	};
	if (decision === 'dispatch') return { output: PROCEED, json: { ...item.json, durable } };
	if (decision === 'reuse_receipt') {
		const receipt = (answer.receipt as IDataObject) ?? (operation.receipt as IDataObject) ?? {};
		return {
			output: ALREADY_DONE,
			json: { ...item.json, durable: { ...durable, remote_id: operation.remote_id ?? null, receipt } },
		};
	}
	if (decision === 'reconcile') return null;
	const reason = decision === 'needs_review' ? 'needs_review' : String(answer.reason ?? decision);
	return attention(item, req, decision, reason, answer.message, operation);
}

const ROUTED_REFUSALS = new Set(['digest_mismatch', 'stale_fencing_token']);

async function begin(ctx: IExecuteFunctions, i: number, req: BeginRequest) {
	const answer = await ledgerRequest(ctx, 'POST', '/v1/operations/begin', req.body, i);
	if (!answer.ok && !ROUTED_REFUSALS.has(answer.refusal.code)) {
		throw refusalError(ctx, answer.refusal, i, `Beginning step ${req.action} of job ${req.jobId}`);
	}
	return answer;
}

export async function beginStep(ctx: IExecuteFunctions, i: number, item: INodeExecutionData): Promise<StepResult> {
	const jobId = requiredString(ctx, 'jobId', i, 'Job ID');
	const token = fencingToken(ctx, i);
	const action = requiredString(ctx, 'action', i, 'Action');
	const payload = jsonParam(ctx, 'payload', i, 'Payload', {});
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
	const req: BeginRequest = { jobId, action, token, body };

	const first = await begin(ctx, i, req);
	if (!first.ok) return refusalToAttention(item, req, first.refusal);
	const routed = route(item, req, first.body);
	if (routed) return routed;

	// decision "reconcile": an earlier attempt is SENT or UNKNOWN. Never retry blindly: ask the
	// ledger to check the remote, then begin once more (it answers reuse_receipt, dispatch for a
	// provably absent write, or needs_review).
	const operation = (first.body.operation as IDataObject) ?? {};
	const key = String(operation.operation_key ?? operationKey ?? '');
	if (options.autoReconcile !== false && key) {
		// Best effort: if the ledger cannot reconcile now (remote down, no reconciler for the
		// target), the step still goes to Needs Attention, never to Proceed.
		const reconciled = await ledgerRequest(ctx, 'POST', operationPath(key, 'reconcile'), { fencing_token: token }, i);
		if (!reconciled.ok) {
			return attention(item, req, 'reconcile', 'outcome_unknown', first.body.message, operation, {
				reconcile_error: { http_status: reconciled.refusal.status, code: reconciled.refusal.code, message: reconciled.refusal.message },
			});
		}
		const second = await begin(ctx, i, req);
		if (!second.ok) return refusalToAttention(item, req, second.refusal);
		const again = route(item, req, second.body);
		if (again) return again;
		return attention(item, req, 'reconcile', 'outcome_unknown', second.body.message, second.body.operation as IDataObject);
	}
	return attention(item, req, 'reconcile', 'outcome_unknown', first.body.message, operation);
}
