import type { IExecuteFunctions, INodeExecutionData } from 'n8n-workflow';
import { asNodeError } from '../../errors';
import {
	LIVE_S,
	LIVENESS_FROM,
	beginBeating,
	holderOf,
	sendCarrying,
	whileBeating,
	type Beats,
	type Holder,
} from '../../liveness';
import { ledgerSend } from '../../transport';
import type { DurableOperation, StepResult } from '../../types';
import { beginAll, type BeginSlot, type PrepareItem } from '../beginStep/batch';
import type { GatedPrepared } from './effect';
import { runGated } from './lifecycle';

type Answered = { result: StepResult } | { error: unknown };

interface Begun {
	slots: BeginSlot<GatedPrepared>[];
	/** One item under liveness: its beats, the first one carried by the begin or sent beside it. */
	beats?: Beats;
	/** The holder whose heartbeat the ledger renews in a call's round trip (`heartbeat` in the body). */
	carries?: string;
}

async function firstBegins(
	ctx: IExecuteFunctions,
	items: INodeExecutionData[],
	prepareItem: PrepareItem<GatedPrepared>,
	beating: boolean,
): Promise<Begun> {
	if (items.length !== 1) return { slots: await beginAll(ctx, items, prepareItem) };
	// One item (the common case): the single route, one round trip without the batch envelope.
	let prepared: GatedPrepared;
	try {
		prepared = prepareItem(ctx, 0);
	} catch (error) {
		if (!ctx.continueOnFail()) throw asNodeError(ctx, error, 0);
		return { slots: [{ error }] };
	}
	const body = prepared.req.body;
	if (!beating) {
		const sent = await ledgerSend(ctx, 'POST', '/v1/operations/begin', body, 0);
		return { slots: ['unreachable' in sent ? { error: sent.unreachable(0) } : { prepared, first: sent.answer }] };
	}
	// The first beat rides on the begin: the ledger renews the lease after the gate, in the same
	// round trip (one ledger call, not two). It only says that this lease's holder is working,
	// which it is whatever the begin answers; the side effect starts after both.
	const holder = holderOf(ctx, items[0].json, prepared.req.jobId, prepared.req.token);
	const { sent, supported, held } = await sendCarrying(ctx, '/v1/operations/begin', body, holder.owner, LIVE_S, 0);
	if ('unreachable' in sent) return { slots: [{ error: sent.unreachable(0) }] };
	return {
		slots: [{ prepared, first: sent.answer }],
		beats: beginBeating(ctx, [holder], held),
		carries: supported ? holder.owner : undefined,
	};
}

/**
 * The item's handover, once its side effect has answered: carried by its confirm when the ledger
 * takes heartbeats in calls (no round trip of its own), else a beat beside the outcome's request.
 * The holder is still live for HANDOVER_S while that request is made; one that takes longer and
 * meets a takeover is settled by its own answer (the ledger's own_answer_after_takeover), never
 * sent again.
 */
function handingOver(prepared: GatedPrepared, beats: Beats, carries: string | undefined): GatedPrepared {
	const handover = async (verb: string): Promise<string | undefined> => {
		if (carries !== undefined && verb === 'confirm') {
			await beats.handOver(true);
			return carries;
		}
		void beats.handOver(false);
		return undefined;
	};
	return { ...prepared, handover };
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
		// From 1.4 the node beats for the leases it works under while the side effects run
		// (liveness.ts): a duplicate execution waits for it instead of fencing it out.
		const beating = Number(ctx.getNode().typeVersion ?? 1) >= LIVENESS_FROM;
		const { slots, beats, carries } = await firstBegins(ctx, items, prepareItem, beating);
		const answered: Answered[] = [];
		const holders = beating ? holdersOf(ctx, items, slots) : [];
		await whileBeating(ctx, holders, async (running) => {
			for (let i = 0; i < items.length; i++) {
				const slot = slots[i];
				if ('error' in slot) {
					answered.push({ error: slot.error });
					continue;
				}
				// One item: its side effect is the node's last, so its end hands over.
				const prepared = items.length === 1 && beating ? handingOver(slot.prepared, running, carries) : slot.prepared;
				try {
					answered.push({ result: await runGated(ctx, i, items[i], prepared, slot.first) });
				} catch (error) {
					answered.push({ error });
				}
			}
		}, beats);
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
