import type { IExecuteFunctions, INodeExecutionData } from 'n8n-workflow';
import { EDITOR_DEFAULTS_FROM } from '../../editorDefaults';
import { LIVE_S, holderOf, noteCarried, sendCarrying } from '../../liveness';
import { ledgerRequest } from '../../transport';
import type { DurableOperation, StepResult } from '../../types';
import { answerFirstBegin } from './answer';
import { beginInBatches } from './batch';
import { prepare } from './prepare';

/**
 * One item: one `POST /v1/operations/begin`. From 1.5 it carries the holder's heartbeat (LIVE_S:
 * the step is worked on if it is dispatched), so that the beat after the node (router.ts) is sent
 * only when the step was not dispatched (a HANDOVER_S one).
 */
export async function beginOne(ctx: IExecuteFunctions, i: number, item: INodeExecutionData): Promise<StepResult> {
	const prepared = prepare(ctx, i);
	const { jobId, token } = prepared.req;
	if (Number(ctx.getNode().typeVersion ?? 1) < EDITOR_DEFAULTS_FROM) {
		return answerFirstBegin(ctx, i, item, prepared, await ledgerRequest(ctx, 'POST', '/v1/operations/begin', prepared.req.body, i));
	}
	const { owner } = holderOf(ctx, item.json, jobId, token);
	const { sent, held } = await sendCarrying(ctx, '/v1/operations/begin', prepared.req.body, owner, LIVE_S, i);
	if ('unreachable' in sent) throw sent.unreachable(i);
	if (held) noteCarried(ctx, jobId, token, LIVE_S);
	return answerFirstBegin(ctx, i, item, prepared, sent.answer);
}

/**
 * Outputs Proceed / Already Done / Needs Attention (+ Look Up): outputs.ts. Many items: their
 * begins go to the ledger in one batch request (per 100 items); each item is then routed
 * exactly as if it had been begun on its own.
 */
export const beginStep: DurableOperation = {
	gate: true,
	start: async (ctx, items) => (items.length > 1 ? await beginInBatches(ctx, items) : beginOne),
};
