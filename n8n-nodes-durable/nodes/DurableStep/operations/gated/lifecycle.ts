import type { IDataObject, IExecuteFunctions, INodeExecutionData } from 'n8n-workflow';
import { EDITOR_DEFAULTS_FROM } from '../../editorDefaults';
import { asReceipt } from '../../params';
import { explainOwn } from '../../reasons';
import { ledgerRequest, operationPath, refusalError, type LedgerAnswer } from '../../transport';
import { ALREADY_DONE, LOOK_UP, PROCEED, type StepResult } from '../../types';
import { followUpReconcile } from '../beginStep/followUp';
import { ROUTED_REFUSALS, attention, refusalToAttention, route } from '../beginStep/route';
import { recordAndRoute } from '../recordOutcome/execute';
import { failureRequest, type OutcomeRequest } from '../recordOutcome/request';
import { withDecidedBy } from '../waitForApproval/decidedBy';
import type { GatedPrepared, LookUpVerdict, Performed, StepTicket } from './effect';

function ticketOf(prepared: GatedPrepared, durable: IDataObject): StepTicket {
	return {
		job_id: prepared.req.jobId,
		action: prepared.req.action,
		operation_key: String(durable.operation_key ?? ''),
		fencing_token: prepared.req.token,
		attempt: typeof durable.attempt === 'number' ? durable.attempt : null,
	};
}

/** What the ledger is told about one try: confirm with the remote id, or the failure's facts. */
function outcomeOf(performed: Performed, token: number): OutcomeRequest {
	if (!performed.ok && 'declared' in performed) {
		const { verb, retryable, message } = performed.declared;
		const body: IDataObject = { fencing_token: token, error: { message } };
		if (verb === 'fail') body.retryable = retryable;
		return { verb, body, failure: null };
	}
	if (!performed.ok) return failureRequest(performed.failure, token);
	const body = {
		fencing_token: token,
		remote_id: performed.remoteId,
		receipt: asReceipt(performed.receipt),
	};
	return { verb: 'confirm', body, failure: null };
}

/**
 * Dispatch: the ledger has this attempt as SENT, so the side effect runs now, once, and its
 * outcome is recorded before the item leaves the node. If n8n dies between the two, the attempt
 * stays SENT and the next run reconciles it (lookup, reconciler or review), never repeats it.
 */
async function performAndRecord(
	ctx: IExecuteFunctions,
	i: number,
	item: INodeExecutionData,
	prepared: GatedPrepared,
	durable: IDataObject,
): Promise<StepResult> {
	const ticket = ticketOf(prepared, durable);
	const performed = await prepared.effect.perform(ctx, i, ticket);
	const json = performed.ok
		? performed.json
		: ('declared' in performed && performed.json) || item.json;
	const answered = { json, pairedItem: { item: i } };
	const outcome = outcomeOf(performed, ticket.fencing_token);
	const handover = await prepared.handover?.(outcome.verb);
	return recordAndRoute(ctx, i, answered, ticket.operation_key, ticket.fencing_token, outcome, handover);
}

/**
 * Already Done: the receipt's fields (what a Done item had from the response) plus `durable`. From
 * node 1.5 the fields are the receipt as stored (the whole answer by default), without the
 * `remote_id` the ledger's answer adds to it: the same fields as the Done item (durable.remote_id
 * has the ID).
 */
function doneBefore(ctx: IExecuteFunctions, result: StepResult): StepResult {
	const durable = result.json.durable as IDataObject;
	const asStored = Number(ctx.getNode().typeVersion ?? 1) >= EDITOR_DEFAULTS_FROM && result.stored;
	const receipt = (asStored ? result.stored : (durable.receipt as IDataObject)) ?? {};
	return { output: ALREADY_DONE, json: { ...receipt, durable } };
}

/**
 * Milliseconds an attempt that is still SENT may yet land: its request was sent at the SENT
 * transition (`updated_at`) and may take the side effect's timeout. 0 when it cannot land any more.
 */
export function stillInFlightMs(
	prepared: GatedPrepared,
	operation: IDataObject,
	now = Date.now(),
): number {
	const window = prepared.effect.inFlightMs ?? 0;
	const sentAt = Date.parse(String(operation.updated_at ?? ''));
	if (operation.state !== 'SENT' || !window || Number.isNaN(sentAt)) return 0;
	return Math.max(0, sentAt + window - now);
}

/** The lookup's verdict, or why there is none: a lookup that failed proves nothing either way. */
async function verdictOf(
	ctx: IExecuteFunctions,
	i: number,
	prepared: GatedPrepared,
	ticket: StepTicket,
): Promise<LookUpVerdict | { failed: string }> {
	try {
		return await prepared.effect.lookUp!(ctx, i, ticket);
	} catch (error) {
		return { failed: String((error as Error)?.message ?? error) };
	}
}

/** The attempt may still land: nothing is decided or sent now, the next run asks again. */
function inFlight(item: INodeExecutionData, prepared: GatedPrepared, operation: IDataObject, waitMs: number): StepResult {
	const explanation = `${explainOwn('in_flight_lookup')} (it may land for another ${Math.ceil(waitMs / 1000)} s)`;
	return attention(item, prepared.req, 'reconcile', 'in_flight_lookup', explanation, operation);
}

/**
 * The built-in Look Up: the same verdict Report Lookup would send, for the attempt the ledger
 * asked about. Answered like begin: found -> Already Done, absent -> a new attempt is dispatched
 * (and performed here), undecidable -> Needs Attention.
 */
async function lookUpAndReport(
	ctx: IExecuteFunctions,
	i: number,
	item: INodeExecutionData,
	prepared: GatedPrepared,
	durable: IDataObject,
): Promise<StepResult> {
	const ticket = ticketOf(prepared, durable);
	const current = (durable.operation as IDataObject) ?? {};
	const early = prepared.effect.lookUpResends ? stillInFlightMs(prepared, current) : 0;
	if (early > 0) return inFlight(item, prepared, current, early);
	const verdict = await verdictOf(ctx, i, prepared, ticket);
	if ('failed' in verdict) {
		// Not reported: "undecidable" would send the step to review for good, although the next
		// run's lookup may well find the object. The step stays UNKNOWN; nothing is resent.
		const explanation = `${explainOwn('lookup_failed')} (${verdict.failed})`;
		return attention(
			item,
			prepared.req,
			'reconcile',
			'lookup_failed',
			explanation,
			(durable.operation as IDataObject) ?? undefined,
		);
	}
	const wait = verdict.result === 'absent' ? stillInFlightMs(prepared, current) : 0;
	if (wait > 0) {
		// Absent now is no proof: another execution sent this attempt moments ago and its request
		// may still land (the same order triggered twice). Not reported; the next run looks again.
		return inFlight(item, prepared, current, wait);
	}
	const body: IDataObject = {
		fencing_token: ticket.fencing_token,
		attempt: ticket.attempt,
		result: verdict.result,
		evidence: verdict.evidence,
	};
	if (verdict.result === 'found') {
		body.remote_id = verdict.remoteId ?? '';
		body.receipt = asReceipt(verdict.receipt ?? {});
	}
	const answer = await ledgerRequest(
		ctx,
		'POST',
		operationPath(ticket.operation_key, 'lookup-result'),
		body,
		i,
	);
	if (!answer.ok) {
		if (ROUTED_REFUSALS.has(answer.refusal.code))
			return refusalToAttention(item, prepared.req, answer.refusal);
		throw refusalError(ctx, answer.refusal, i, `Reporting the lookup of ${ticket.operation_key}`);
	}
	const operation = (answer.body.operation as IDataObject) ?? {};
	const routed =
		route(item, prepared.req, answer.body) ??
		attention(
			item,
			prepared.req,
			'reconcile',
			'lookup_not_applied',
			explainOwn('lookup_not_applied', answer.body.message),
			operation,
		);
	// What the lookup was asked and saw (the match field and value, the objects, the ID), beside
	// the ledger's verdict: the item shows what the step was decided on.
	(routed.json.durable as IDataObject).lookup = {
		...((answer.body.lookup as IDataObject) ?? { result: verdict.result }),
		evidence: verdict.evidence,
	};
	return routed;
}

/**
 * One item of a one-node operation, from the answer to its first begin: Begin Step's routing,
 * with the side effect, the built-in lookup and the outcome run inside the node. Outputs Done
 * (performed and confirmed now), Already Done (the receipt of an earlier run) or Needs Attention.
 */
export async function runGated(
	ctx: IExecuteFunctions,
	i: number,
	item: INodeExecutionData,
	prepared: GatedPrepared,
	first: LedgerAnswer,
): Promise<StepResult> {
	return withDecidedBy(item, await answerGated(ctx, i, item, prepared, first));
}

async function answerGated(
	ctx: IExecuteFunctions,
	i: number,
	item: INodeExecutionData,
	prepared: GatedPrepared,
	first: LedgerAnswer,
): Promise<StepResult> {
	if (!first.ok) {
		if (!ROUTED_REFUSALS.has(first.refusal.code)) {
			throw refusalError(
				ctx,
				first.refusal,
				i,
				`Beginning step ${prepared.req.action} of job ${prepared.req.jobId}`,
			);
		}
		return refusalToAttention(item, prepared.req, first.refusal);
	}
	let result =
		route(item, prepared.req, first.body) ??
		(await followUpReconcile(ctx, i, item, prepared, first.body));
	if (result.output === LOOK_UP)
		result = await lookUpAndReport(ctx, i, item, prepared, result.json.durable as IDataObject);
	if (result.output === PROCEED) {
		const durable = result.json.durable as IDataObject;
		const done = await performAndRecord(ctx, i, item, prepared, durable);
		// A new attempt after a lookup that proved the object absent: the item keeps that evidence,
		// so the output says why the step ran again (attempt 2) and not only that it did.
		if (durable.lookup !== undefined && done.json.durable)
			(done.json.durable as IDataObject).lookup ??= durable.lookup;
		return done;
	}
	if (result.output === ALREADY_DONE) return doneBefore(ctx, result);
	return result;
}
