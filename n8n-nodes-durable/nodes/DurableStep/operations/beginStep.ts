import type { IDataObject, IExecuteFunctions, INodeExecutionData } from 'n8n-workflow';
import { fencingToken, jsonParam, optionalString, requiredString } from '../params';
import type { LedgerAnswer, LedgerRefusal } from '../transport';
import { ledgerRequest, ledgerSend, operationPath, refusalError, slotRefusal } from '../transport';
import { ALREADY_DONE, LOOK_UP, NEEDS_ATTENTION, PROCEED, type StepResult } from '../types';

/** Human-readable explanations for the Needs Attention reason codes. */
const EXPLANATIONS: Record<string, string> = {
	lookup_required:
		'An earlier attempt of this step was sent but its outcome was never recorded, and the ledger has no reconciler for this action. Look the object up by durable.operation_key (the key you stamped on it), then report found / absent / undecidable with Durable Step: Report Lookup. Nothing was repeated.',
	lookup_not_applied:
		'Report Lookup was for an attempt that is no longer the one in flight (another run moved this step on), so the ledger changed nothing. Run the workflow again: Begin Step asks for a lookup of the current attempt.',
	outcome_unknown:
		'An earlier attempt of this step was sent, but whether it took effect is unknown and the ledger could not prove it either way. Nothing was repeated. Check the remote system and resolve the operation in the review queue, then run the workflow again.',
	needs_review:
		'An earlier attempt of this step could not be reconciled automatically; it waits for an editor decision in the review queue. Nothing was repeated.',
	digest_mismatch:
		'This step was already begun with a different payload. Either the content really changed (bump the job task version) or the payload expression is not deterministic (timestamps, random IDs): make it stable.',
	stale_fencing_token:
		"Another execution took over this job's lease after this one started. This execution must stop; the newer one continues.",
	approval_required: 'The step needs an approval of this exact payload by an approver before it may run.',
	approval_denied:
		'An approver denied this exact payload; nothing was done. Change the content (and bump the job task version) or ask the approver again.',
	cancelled: 'The job was cancelled; no further side effects are allowed.',
	authorization_revoked:
		'An earlier step was refused with 401/403 by the remote system, so the job was halted. Fix the credentials, then resume the job.',
	abandoned: 'An editor decided this step must not be done.',
	attempts_exhausted: 'The step failed and its retry budget is used up.',
	budget_exhausted: "The job's budget is used up.",
};

export function explain(reason: string, ledgerMessage: unknown): string {
	const base = EXPLANATIONS[reason];
	const fromLedger = typeof ledgerMessage === 'string' && ledgerMessage ? ledgerMessage : '';
	if (base && fromLedger) return `${base} (ledger: ${fromLedger})`;
	return base || fromLedger || `The ledger stopped this step (${reason}).`;
}

export interface BeginRequest {
	jobId: string;
	action: string;
	token: number;
	body: IDataObject;
}

export function attention(
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

export function refusalToAttention(item: INodeExecutionData, req: BeginRequest, refusal: LedgerRefusal): StepResult {
	return attention(item, req, 'refused', refusal.code, refusal.message, undefined, {
		http_status: refusal.status,
		details: refusal.details,
	});
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
		return {
			output: ALREADY_DONE,
			json: { ...item.json, durable: { ...durable, remote_id: operation.remote_id ?? null, receipt } },
		};
	}
	if (decision === 'reconcile') return null;
	const reason = decision === 'needs_review' ? 'needs_review' : String(answer.reason ?? decision);
	const denial = answer.denial as IDataObject | undefined;
	if (reason === 'approval_denied' && denial) {
		const why = typeof denial.reason === 'string' && denial.reason ? `: "${denial.reason}"` : '';
		const who = typeof denial.denied_by === 'string' ? ` (${denial.denied_by})` : '';
		return attention(item, req, decision, reason, `denied${who}${why}`, operation, { denial });
	}
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

interface Prepared {
	req: BeginRequest;
	operationKey: string | undefined;
	autoReconcile: boolean;
	lookUp: boolean;
}

/** Reads and checks one item's parameters; throws NodeOperationError for a bad one. */
function prepare(ctx: IExecuteFunctions, i: number): Prepared {
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
	return {
		req: { jobId, action, token, body },
		operationKey,
		autoReconcile: options.autoReconcile !== false,
		lookUp: options.routeToLookUp === true,
	};
}

/** Routes the answer to an item's first begin (single route or batch slot), reconciling if asked. */
async function finish(
	ctx: IExecuteFunctions,
	i: number,
	item: INodeExecutionData,
	prepared: Prepared,
	first: LedgerAnswer,
): Promise<StepResult> {
	const { req, operationKey, autoReconcile, lookUp } = prepared;
	const token = req.token;
	if (!first.ok) {
		if (!ROUTED_REFUSALS.has(first.refusal.code)) {
			throw refusalError(ctx, first.refusal, i, `Beginning step ${req.action} of job ${req.jobId}`);
		}
		return refusalToAttention(item, req, first.refusal);
	}
	const routed = route(item, req, first.body);
	if (routed) return routed;

	// decision "reconcile": an earlier attempt is SENT or UNKNOWN. Never retry blindly: ask the
	// ledger to check the remote, then begin once more (it answers reuse_receipt, dispatch for a
	// provably absent write, or needs_review).
	const operation = (first.body.operation as IDataObject) ?? {};
	const key = String(operation.operation_key ?? operationKey ?? '');
	const reconciliation = (first.body.reconciliation as IDataObject | undefined) ?? {};
	if (lookUp && key && reconciliation.outcome === 'no_reconciler') {
		// No server-side reconciler for this action: the workflow's own nodes look the object up
		// by its operation key, and Report Lookup tells the ledger what they found.
		return lookUpItem(item, req, key, operation, first.body.message);
	}
	if (autoReconcile && key) {
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
				explanation: explain('lookup_required', message),
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

/** One item: one `POST /v1/operations/begin`. */
export async function beginStep(ctx: IExecuteFunctions, i: number, item: INodeExecutionData): Promise<StepResult> {
	const prepared = prepare(ctx, i);
	const first = await ledgerRequest(ctx, 'POST', '/v1/operations/begin', prepared.req.body, i);
	return finish(ctx, i, item, prepared, first);
}

/** Items per `POST /v1/operations/batch` (the ledger's limit). */
export const BATCH_SIZE = 100;

/** An item's first begin, fetched for all items at once: its answer, or why it has none. */
export type BeginSlot = { prepared: Prepared; first: LedgerAnswer } | { error: unknown };

export type BeginBatch = { slots: BeginSlot[] } | { failedAt: number; error: unknown };

/**
 * Whole-batch refusals that say nothing about the items' own answers: an older ledger without
 * the route (404/405), or a request body the ledger rejected as a whole because one item is
 * malformed (400/422). The chunk is then sent item by item, so that each item gets exactly the
 * single route's answer and a bad item does not take the others down.
 */
function batchUnusable(refusal: LedgerRefusal): boolean {
	return [400, 404, 405, 422].includes(refusal.status);
}

async function beginOneByOne(ctx: IExecuteFunctions, chunk: Array<{ i: number; prepared: Prepared }>, slots: BeginSlot[]) {
	for (const { i, prepared } of chunk) {
		try {
			const sent = await ledgerSend(ctx, 'POST', '/v1/operations/begin', prepared.req.body, i);
			slots[i] = 'unreachable' in sent ? { error: sent.unreachable(i) } : { prepared, first: sent.answer };
		} catch (error) {
			slots[i] = { error };
		}
	}
}

/**
 * Many items: their first begins go out in one `POST /v1/operations/batch` per 100 items. Each
 * slot of the answer is the single route's body or `{error}` for that item alone, and is turned
 * into the same LedgerAnswer the single route would have given, so routing stays per item.
 * Parameters are checked first: without Continue On Fail a bad item stops the node before any
 * request (nothing is begun); with it, only that item fails.
 */
export async function beginBatch(ctx: IExecuteFunctions, items: INodeExecutionData[]): Promise<BeginBatch> {
	const slots: BeginSlot[] = new Array(items.length);
	const ready: Array<{ i: number; prepared: Prepared }> = [];
	for (let i = 0; i < items.length; i++) {
		try {
			ready.push({ i, prepared: prepare(ctx, i) });
		} catch (error) {
			if (!ctx.continueOnFail()) return { failedAt: i, error };
			slots[i] = { error };
		}
	}
	for (let c = 0; c < ready.length; c += BATCH_SIZE) {
		const chunk = ready.slice(c, c + BATCH_SIZE);
		let sent;
		try {
			sent = await ledgerSend(ctx, 'POST', '/v1/operations/batch', { begin: chunk.map((x) => x.prepared.req.body) }, chunk[0].i);
		} catch (error) {
			for (const { i } of chunk) slots[i] = { error };
			continue;
		}
		if ('unreachable' in sent) {
			for (const { i } of chunk) slots[i] = { error: sent.unreachable(i) };
			continue;
		}
		const answer = sent.answer;
		if (!answer.ok) {
			if (batchUnusable(answer.refusal)) {
				await beginOneByOne(ctx, chunk, slots);
			} else {
				// 401, 403, 5xx...: every item fails the way its own request would have.
				for (const { i, prepared } of chunk) slots[i] = { prepared, first: answer };
			}
			continue;
		}
		const answers = answer.body.begin;
		if (!Array.isArray(answers) || answers.length !== chunk.length) {
			const refusal: LedgerRefusal = {
				status: answer.status,
				code: 'ledger_error',
				message: `The ledger answered the batch of ${chunk.length} begins with ${Array.isArray(answers) ? answers.length : 'no'} slots`,
				details: {},
			};
			for (const { i, prepared } of chunk) slots[i] = { prepared, first: { ok: false, refusal } };
			continue;
		}
		chunk.forEach(({ i, prepared }, k) => {
			const slot = (answers[k] ?? {}) as IDataObject;
			const error = slot.error;
			slots[i] =
				error && typeof error === 'object' && !Array.isArray(error)
					? { prepared, first: { ok: false, refusal: slotRefusal(error as IDataObject) } }
					: { prepared, first: { ok: true, status: answer.status, body: slot } };
		});
	}
	return { slots };
}

/** Routes one item of a batch, exactly as beginStep would have with the same first answer. */
export async function beginFromSlot(
	ctx: IExecuteFunctions,
	i: number,
	item: INodeExecutionData,
	slot: BeginSlot,
): Promise<StepResult> {
	if ('error' in slot) throw slot.error;
	return finish(ctx, i, item, slot.prepared, slot.first);
}
