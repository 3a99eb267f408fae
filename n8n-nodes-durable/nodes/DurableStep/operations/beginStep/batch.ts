import type { IDataObject, IExecuteFunctions, INodeExecutionData } from 'n8n-workflow';
import { asNodeError } from '../../errors';
import type { LedgerAnswer, LedgerRefusal } from '../../transport';
import { ledgerSend, slotRefusal } from '../../transport';
import type { ItemStep } from '../../types';
import { answerFirstBegin } from './answer';
import { prepare, type Prepared } from './prepare';

/** Items per `POST /v1/operations/batch` (the ledger's limit). */
export const BATCH_SIZE = 100;

/** An item's first begin, fetched for all items at once: its answer, or why it has none. */
export type BeginSlot<P extends Prepared = Prepared> = { prepared: P; first: LedgerAnswer } | { error: unknown };

type Ready = { i: number; prepared: Prepared };

/** Reads one item's parameters into its begin (Begin Step's prepare, or a one-node operation's). */
export type PrepareItem<P extends Prepared> = (ctx: IExecuteFunctions, i: number) => P;

/**
 * Whole-batch refusals that say nothing about the items' own answers: an older ledger without
 * the route (404/405), or a request body the ledger rejected as a whole because one item is
 * malformed (400/422). The chunk is then sent item by item, so that each item gets exactly the
 * single route's answer and a bad item does not take the others down.
 */
function batchUnusable(refusal: LedgerRefusal): boolean {
	return [400, 404, 405, 422].includes(refusal.status);
}

async function beginOneByOne(ctx: IExecuteFunctions, chunk: Ready[], slots: BeginSlot[]) {
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
 * Parameters are checked first: without Continue On Fail a bad item stops the node before any
 * request (nothing is begun); with it, only that item fails.
 */
function prepareAll<P extends Prepared>(
	ctx: IExecuteFunctions,
	items: INodeExecutionData[],
	slots: BeginSlot[],
	prepareItem: PrepareItem<P>,
): Ready[] {
	const ready: Ready[] = [];
	for (let i = 0; i < items.length; i++) {
		try {
			ready.push({ i, prepared: prepareItem(ctx, i) });
		} catch (error) {
			if (!ctx.continueOnFail()) throw asNodeError(ctx, error, i);
			slots[i] = { error };
		}
	}
	return ready;
}

/** Each slot of a batch answer is the single route's body, or `{error}` for that item alone. */
function fillFromAnswer(chunk: Ready[], status: number, body: IDataObject, slots: BeginSlot[]) {
	const answers = body.begin;
	if (!Array.isArray(answers) || answers.length !== chunk.length) {
		const refusal: LedgerRefusal = {
			status,
			code: 'ledger_error',
			message: `The ledger answered the batch of ${chunk.length} begins with ${Array.isArray(answers) ? answers.length : 'no'} slots`,
			details: {},
		};
		for (const { i, prepared } of chunk) slots[i] = { prepared, first: { ok: false, refusal } };
		return;
	}
	chunk.forEach(({ i, prepared }, k) => {
		const slot = (answers[k] ?? {}) as IDataObject;
		const error = slot.error;
		slots[i] =
			error && typeof error === 'object' && !Array.isArray(error)
				? { prepared, first: { ok: false, refusal: slotRefusal(error as IDataObject) } }
				: { prepared, first: { ok: true, status, body: slot } };
	});
}

/** One `POST /v1/operations/batch` for up to BATCH_SIZE items; fills their slots. */
async function beginChunk(ctx: IExecuteFunctions, chunk: Ready[], slots: BeginSlot[]) {
	let sent;
	try {
		sent = await ledgerSend(ctx, 'POST', '/v1/operations/batch', { begin: chunk.map((x) => x.prepared.req.body) }, chunk[0].i);
	} catch (error) {
		for (const { i } of chunk) slots[i] = { error };
		return;
	}
	if ('unreachable' in sent) {
		for (const { i } of chunk) slots[i] = { error: sent.unreachable(i) };
		return;
	}
	const answer = sent.answer;
	if (answer.ok) {
		fillFromAnswer(chunk, answer.status, answer.body, slots);
	} else if (batchUnusable(answer.refusal)) {
		await beginOneByOne(ctx, chunk, slots);
	} else {
		// 401, 403, 5xx...: every item fails the way its own request would have.
		for (const { i, prepared } of chunk) slots[i] = { prepared, first: answer };
	}
}

/**
 * Many items: their first begins go out in one `POST /v1/operations/batch` per 100 items, and
 * each slot of the answer is turned into the same LedgerAnswer the single route would have
 * given, so routing stays per item. The ledger begins every item of a batch before the node
 * routes any of them: if one item's refusal stops the node (no Continue On Fail), the later
 * items were already begun (those answered dispatch are SENT in the ledger but were never
 * sent), and the next run reconciles them instead of repeating them.
 */
export async function beginAll<P extends Prepared>(
	ctx: IExecuteFunctions,
	items: INodeExecutionData[],
	prepareItem: PrepareItem<P>,
): Promise<BeginSlot<P>[]> {
	const slots: BeginSlot[] = new Array(items.length);
	const ready = prepareAll(ctx, items, slots, prepareItem);
	for (let c = 0; c < ready.length; c += BATCH_SIZE) {
		await beginChunk(ctx, ready.slice(c, c + BATCH_SIZE), slots);
	}
	return slots as BeginSlot<P>[];
}

export async function beginInBatches(ctx: IExecuteFunctions, items: INodeExecutionData[]): Promise<ItemStep> {
	const slots = await beginAll(ctx, items, prepare);
	// Routes one item exactly as the single route would have with the same first answer.
	return async (stepCtx, i, item) => {
		const slot = slots[i];
		if ('error' in slot) throw slot.error;
		return answerFirstBegin(stepCtx, i, item, slot.prepared, slot.first);
	};
}
