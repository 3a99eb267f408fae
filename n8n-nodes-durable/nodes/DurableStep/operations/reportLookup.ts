import type { IDataObject, IExecuteFunctions, INodeExecutionData } from 'n8n-workflow';
import { NodeOperationError } from 'n8n-workflow';
import { fencingToken, jsonObject, jsonParam, optionalString, requiredString } from '../params';
import { ledgerRequest, operationPath, refusalError } from '../transport';
import { type StepResult } from '../types';
import { attention, refusalToAttention, route, type BeginRequest } from './beginStep';

const RESULTS = ['found', 'absent', 'undecidable'];

function asReceipt(value: unknown): IDataObject {
	if (value && typeof value === 'object' && !Array.isArray(value)) return value as IDataObject;
	if (value === undefined || value === null || value === '') return {};
	return { value: value as IDataObject[keyof IDataObject] };
}

/**
 * After Begin Step's Look Up output: the workflow's own nodes searched the remote for the
 * operation key; `POST /v1/operations/{key}/lookup-result` settles the step as a reconciler
 * would and answers like begin, so the item is routed like Begin Step's: found -> Already Done,
 * absent -> Proceed (a new attempt is dispatched now), undecidable -> Needs Attention (review).
 */
export async function reportLookup(ctx: IExecuteFunctions, i: number, item: INodeExecutionData): Promise<StepResult> {
	const key = requiredString(ctx, 'operationKey', i, 'Operation Key');
	const token = fencingToken(ctx, i);
	const attemptRaw = ctx.getNodeParameter('attempt', i, '') as unknown;
	const attempt = typeof attemptRaw === 'number' ? attemptRaw : Number(String(attemptRaw ?? '').trim());
	if (attemptRaw === '' || attemptRaw === null || !Number.isInteger(attempt) || attempt < 1) {
		throw new NodeOperationError(ctx.getNode(), `"Attempt" must be a positive integer, got ${JSON.stringify(attemptRaw)}`, {
			itemIndex: i,
			description:
				"Use the attempt from Begin Step's Look Up item (default {{ $('Begin Step').item.json.durable.attempt }}): the ledger applies the verdict only to the attempt that was looked up.",
		});
	}
	const result = String(ctx.getNodeParameter('lookupResult', i, '') ?? '').trim();
	if (!RESULTS.includes(result)) {
		throw new NodeOperationError(ctx.getNode(), `"Result" must be found, absent or undecidable, got ${JSON.stringify(result)}`, {
			itemIndex: i,
			description:
				'For example {{ $json.id ? "found" : "absent" }} after a lookup that returns the object or an empty item. Say "absent" only when the lookup proves nothing was written (docs/builders.md).',
		});
	}
	const body: IDataObject = {
		fencing_token: token,
		attempt,
		result,
		evidence: jsonObject(jsonParam(ctx, 'evidence', i, 'Evidence', {}), ctx, i, 'Evidence'),
	};
	if (result === 'found') {
		const remoteId = optionalString(ctx.getNodeParameter('remoteId', i, ''));
		if (!remoteId) {
			throw new NodeOperationError(ctx.getNode(), '"Remote ID" is empty, so the object cannot be reported as found', {
				itemIndex: i,
				description: 'Set "Remote ID" to the ID of the object the lookup found (default {{ $json.id }}).',
			});
		}
		body.remote_id = remoteId;
		body.receipt = asReceipt(jsonParam(ctx, 'receipt', i, 'Receipt', {}));
	}

	const answer = await ledgerRequest(ctx, 'POST', operationPath(key, 'lookup-result'), body, i);
	const operation = answer.ok ? ((answer.body.operation as IDataObject) ?? {}) : {};
	const req: BeginRequest = {
		jobId: String(operation.job_id ?? ''),
		action: String(operation.action ?? ''),
		token,
		body: { operation_key: key },
	};
	if (!answer.ok) {
		if (['digest_mismatch', 'stale_fencing_token'].includes(answer.refusal.code)) {
			return refusalToAttention(item, req, answer.refusal);
		}
		throw refusalError(ctx, answer.refusal, i, `Reporting the lookup of ${key}`);
	}
	const lookup = (answer.body.lookup as IDataObject) ?? {};
	const routed =
		route(item, req, answer.body) ??
		attention(item, req, 'reconcile', 'lookup_not_applied', answer.body.message, operation);
	(routed.json.durable as IDataObject).lookup = lookup;
	return routed;
}
