import type { IDataObject, IExecuteFunctions, INodeExecutionData } from 'n8n-workflow';
import { fencingToken, requiredString } from '../../params';
import { explainOwn } from '../../reasons';
import { ledgerRequest, operationPath, refusalError } from '../../transport';
import type { DurableOperation, StepResult } from '../../types';
import type { BeginRequest } from '../beginStep/prepare';
import { ROUTED_REFUSALS, attention, refusalToAttention, route } from '../beginStep/route';
import { lookupBody } from './body';

/**
 * After Begin Step's Look Up output: the workflow's own nodes searched the remote for the
 * operation key; `POST /v1/operations/{key}/lookup-result` settles the step as a reconciler
 * would and answers like begin, so the item is routed like Begin Step's: found -> Already Done,
 * absent -> Proceed (a new attempt is dispatched now), undecidable -> Needs Attention (review).
 */
export async function reportLookupItem(ctx: IExecuteFunctions, i: number, item: INodeExecutionData): Promise<StepResult> {
	const key = requiredString(ctx, 'operationKey', i, 'Operation Key');
	const token = fencingToken(ctx, i);
	const body = lookupBody(ctx, i, token);

	const answer = await ledgerRequest(ctx, 'POST', operationPath(key, 'lookup-result'), body, i);
	const operation = answer.ok ? ((answer.body.operation as IDataObject) ?? {}) : {};
	const req: BeginRequest = {
		jobId: String(operation.job_id ?? ''),
		action: String(operation.action ?? ''),
		token,
		body: { operation_key: key },
	};
	if (!answer.ok) {
		if (ROUTED_REFUSALS.has(answer.refusal.code)) return refusalToAttention(item, req, answer.refusal);
		throw refusalError(ctx, answer.refusal, i, `Reporting the lookup of ${key}`);
	}
	const lookup = (answer.body.lookup as IDataObject) ?? {};
	const routed =
		route(item, req, answer.body) ??
		attention(item, req, 'reconcile', 'lookup_not_applied', explainOwn('lookup_not_applied', answer.body.message), operation);
	(routed.json.durable as IDataObject).lookup = lookup;
	return routed;
}

/** Gate: an error item never reaches Proceed, which dispatches the step again. */
export const reportLookup: DurableOperation = { gate: true, start: async () => reportLookupItem };
