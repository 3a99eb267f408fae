import type { IExecuteFunctions, INodeExecutionData } from 'n8n-workflow';
import { asNodeError } from '../../errors';
import { LIVENESS_FROM, holderOf, whileBeating, type Holder } from '../../liveness';
import { ledgerSend } from '../../transport';
import type { DurableOperation, StepResult } from '../../types';
import { beginAll, type BeginSlot, type PrepareItem } from '../beginStep/batch';
import type { GatedPrepared } from './effect';
import { runGated } from './lifecycle';

type Answered = { result: StepResult } | { error: unknown };

async function firstBegins(
	ctx: IExecuteFunctions,
	items: INodeExecutionData[],
	prepareItem: PrepareItem<GatedPrepared>,
): Promise<BeginSlot<GatedPrepared>[]> {
	if (items.length !== 1) return beginAll(ctx, items, prepareItem);
	// One item (the common case): the single route, one round trip without the batch envelope.
	let prepared: GatedPrepared;
	try {
		prepared = prepareItem(ctx, 0);
	} catch (error) {
		if (!ctx.continueOnFail()) throw asNodeError(ctx, error, 0);
		return [{ error }];
	}
	const sent = await ledgerSend(ctx, 'POST', '/v1/operations/begin', prepared.req.body, 0);
	return ['unreachable' in sent ? { error: sent.unreachable(0) } : { prepared, first: sent.answer }];
}

/** The distinct leases (job, token) the begun items work under. */
function holdersOf(ctx: IExecuteFunctions, items: INodeExecutionData[], slots: BeginSlot<GatedPrepared>[]): Holder[] {
	const seen = new Map<string, Holder>();
	slots.forEach((slot, i) => {
		if ('error' in slot) return;
		const { jobId, token } = slot.prepared.req;
		const key = `${jobId}\u0000${token}`;
		if (!seen.has(key)) seen.set(key, holderOf(ctx, items[i].json, jobId, token));
	});
	return [...seen.values()];
}

/**
 * A one-node operation: all items are begun first (one batch request per 100), then each
 * dispatched item's side effect is performed and recorded, in item order, before any item is
 * routed. An item that fails the node (Needs Attention without its output, a refusal) therefore
 * stops the execution only after every begun item has run and been recorded: none is left SENT
 * without having been sent, which its next run could only send to review.
 */
export function gatedOperation(prepareItem: PrepareItem<GatedPrepared>): DurableOperation {
	const answerAll = async (ctx: IExecuteFunctions, items: INodeExecutionData[]): Promise<Answered[]> => {
		const slots = await firstBegins(ctx, items, prepareItem);
		const answered: Answered[] = [];
		// From 1.4 the node beats for the leases it works under while the side effects run
		// (liveness.ts): a duplicate execution waits for it instead of fencing it out.
		const holders = Number(ctx.getNode().typeVersion ?? 1) >= LIVENESS_FROM ? holdersOf(ctx, items, slots) : [];
		await whileBeating(ctx, holders, async () => {
			for (let i = 0; i < items.length; i++) {
				const slot = slots[i];
				if ('error' in slot) {
					answered.push({ error: slot.error });
					continue;
				}
				try {
					answered.push({ result: await runGated(ctx, i, items[i], slot.prepared, slot.first) });
				} catch (error) {
					answered.push({ error });
				}
			}
		});
		return answered;
	};
	const replay = (answered: Answered[], i: number) => {
		const a = answered[i];
		if ('error' in a) throw a.error;
		return a.result;
	};
	return {
		gate: true,
		start: async (ctx, items) => {
			// One item: nothing to order, so the work happens when the router asks for the item.
			if (items.length === 1) return async (stepCtx, i, item) => replay(await answerAll(stepCtx, [item]), i);
			const answered = await answerAll(ctx, items);
			return async (_ctx, i) => replay(answered, i);
		},
	};
}
