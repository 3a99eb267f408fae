import type { IDataObject, INodeExecutionData } from 'n8n-workflow';
import { explain, explainOwn } from '../../reasons';
import type { LedgerRefusal } from '../../transport';
import { ALREADY_DONE, NEEDS_ATTENTION, PROCEED, type StepResult } from '../../types';
import type { BeginRequest } from './prepare';

/** Refusals of a gate that go to Needs Attention (the others fail the item). */
export const ROUTED_REFUSALS = new Set([
	'digest_mismatch',
	'action_mismatch',
	'target_mismatch',
	'job_mismatch',
	'stale_fencing_token',
]);

/** A Needs Attention item: the input item plus what stopped the step and why. */
export function attention(
	item: INodeExecutionData,
	req: BeginRequest,
	decision: string,
	reason: string,
	explanation: string,
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
				explanation,
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

/** A routed refusal (HTTP 422 / 409) as a Needs Attention item. */
export function refusalToAttention(item: INodeExecutionData, req: BeginRequest, refusal: LedgerRefusal): StepResult {
	return attention(item, req, 'refused', refusal.code, explainOwn(refusal.code, refusal.message), undefined, {
		http_status: refusal.status,
		details: refusal.details,
	});
}

/** A halt or needs_review answer: the ledger's message, and who denied an approval and why. */
function stopped(item: INodeExecutionData, req: BeginRequest, answer: IDataObject, decision: string): StepResult {
	const operation = (answer.operation as IDataObject) ?? {};
	const reason = decision === 'needs_review' ? 'needs_review' : String(answer.reason ?? decision);
	const explanation = explain(reason, answer.message);
	const denial = answer.denial as IDataObject | undefined;
	if (reason === 'approval_denied' && denial) {
		const why = typeof denial.reason === 'string' && denial.reason ? `: "${denial.reason}"` : '';
		const who = typeof denial.denied_by === 'string' ? ` by ${denial.denied_by}` : '';
		return attention(item, req, decision, reason, `${explanation} (denied${who}${why})`, operation, { denial });
	}
	return attention(item, req, decision, reason, explanation, operation);
}

/**
 * Maps a begin answer (also Report Lookup's, which has the same shape) to an output. Returns null
 * for `reconcile` so the caller may reconcile.
 */
export function route(item: INodeExecutionData, req: BeginRequest, answer: IDataObject): StepResult | null {
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
		const stored = operation.receipt && typeof operation.receipt === 'object' ? (operation.receipt as IDataObject) : undefined;
		return {
			output: ALREADY_DONE,
			json: { ...item.json, durable: { ...durable, remote_id: operation.remote_id ?? null, receipt } },
			stored,
		};
	}
	if (decision === 'reconcile') return null;
	return stopped(item, req, answer, decision);
}
