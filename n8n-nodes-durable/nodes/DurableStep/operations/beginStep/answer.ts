import type { IExecuteFunctions, INodeExecutionData } from 'n8n-workflow';
import type { LedgerAnswer } from '../../transport';
import { refusalError } from '../../transport';
import type { StepResult } from '../../types';
import { withDecidedBy } from '../waitForApproval/decidedBy';
import { followUpReconcile } from './followUp';
import type { Prepared } from './prepare';
import { ROUTED_REFUSALS, refusalToAttention, route } from './route';

/** Routes the answer to an item's first begin (single route or batch slot), reconciling if asked. */
export async function answerFirstBegin(
	ctx: IExecuteFunctions,
	i: number,
	item: INodeExecutionData,
	prepared: Prepared,
	first: LedgerAnswer,
): Promise<StepResult> {
	const { req } = prepared;
	if (!first.ok) {
		if (!ROUTED_REFUSALS.has(first.refusal.code)) {
			throw refusalError(ctx, first.refusal, i, `Beginning step ${req.action} of job ${req.jobId}`);
		}
		return refusalToAttention(item, req, first.refusal);
	}
	return withDecidedBy(item, route(item, req, first.body) ?? (await followUpReconcile(ctx, i, item, prepared, first.body)));
}
