import type { IExecuteFunctions, INodeExecutionData } from 'n8n-workflow';
import { ledgerRequest } from '../../transport';
import type { DurableOperation, StepResult } from '../../types';
import { answerFirstBegin } from './answer';
import { beginInBatches } from './batch';
import { prepare } from './prepare';

/** One item: one `POST /v1/operations/begin`. */
export async function beginOne(ctx: IExecuteFunctions, i: number, item: INodeExecutionData): Promise<StepResult> {
	const prepared = prepare(ctx, i);
	const first = await ledgerRequest(ctx, 'POST', '/v1/operations/begin', prepared.req.body, i);
	return answerFirstBegin(ctx, i, item, prepared, first);
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
