import type { IDataObject, IExecuteFunctions, INodeExecutionData } from 'n8n-workflow';
import { explain, explainOwn } from '../../reasons';
import { ledgerRequest, operationPath, refusalError } from '../../transport';
import { LOOK_UP, type StepResult } from '../../types';
import type { BeginRequest, Prepared } from './prepare';
import { ROUTED_REFUSALS, attention, refusalToAttention, route } from './route';

/** The begin after a reconcile: the same body again, and the single route's refusal handling. */
async function beginAgain(ctx: IExecuteFunctions, i: number, req: BeginRequest) {
	const answer = await ledgerRequest(ctx, 'POST', '/v1/operations/begin', req.body, i);
	if (!answer.ok && !ROUTED_REFUSALS.has(answer.refusal.code)) {
		throw refusalError(ctx, answer.refusal, i, `Beginning step ${req.action} of job ${req.jobId}`);
	}
	return answer;
}

/** The Look Up output's item: what the lookup nodes and Report Lookup need, and why. */
function lookUpItem(
	item: INodeExecutionData,
	req: BeginRequest,
	key: string,
	operation: IDataObject,
	message: unknown,
): StepResult {
	return {
		output: LOOK_UP,
		json: {
			...item.json,
			durable: {
				decision: 'reconcile',
				reason: 'lookup_required',
				explanation: explainOwn('lookup_required', message),
				job_id: req.jobId,
				action: req.action,
				operation_key: key,
				fencing_token: req.token,
				state: (operation.state as string) ?? null,
				attempt: (operation.attempt as number) ?? null,
				target: (operation.target as string) ?? null,
				operation,
			},
		},
	};
}

/**
 * The answer was `reconcile`: an earlier attempt is SENT or UNKNOWN. Never retry blindly: ask
 * the ledger to check the remote, then begin once more (it answers reuse_receipt, dispatch for a
 * provably absent write, or needs_review).
 */
export async function followUpReconcile(
	ctx: IExecuteFunctions,
	i: number,
	item: INodeExecutionData,
	prepared: Prepared,
	first: IDataObject,
): Promise<StepResult> {
	const { req, operationKey, autoReconcile, lookUp } = prepared;
	const operation = (first.operation as IDataObject) ?? {};
	const key = String(operation.operation_key ?? operationKey ?? '');
	const reconciliation = (first.reconciliation as IDataObject | undefined) ?? {};
	if (lookUp && key && reconciliation.outcome === 'no_reconciler') {
		// No server-side reconciler for this action: the workflow's own nodes look the object up
		// by its operation key, and Report Lookup tells the ledger what they found.
		return lookUpItem(item, req, key, operation, first.message);
	}
	const unknown = (answer: IDataObject, op: IDataObject | undefined, extra?: IDataObject) =>
		attention(item, req, 'reconcile', 'outcome_unknown', explain('outcome_unknown', answer.message), op, extra);
	if (!autoReconcile || !key) return unknown(first, operation);
	// Best effort: if the ledger cannot reconcile now (remote down, no reconciler for the
	// target), the step still goes to Needs Attention, never to Proceed.
	const reconciled = await ledgerRequest(ctx, 'POST', operationPath(key, 'reconcile'), { fencing_token: req.token }, i);
	if (!reconciled.ok) {
		const { status, code, message } = reconciled.refusal;
		return unknown(first, operation, { reconcile_error: { http_status: status, code, message } });
	}
	const second = await beginAgain(ctx, i, req);
	if (!second.ok) return refusalToAttention(item, req, second.refusal);
	return route(item, req, second.body) ?? unknown(second.body, second.body.operation as IDataObject);
}
