import type { IDataObject, IExecuteFunctions } from 'n8n-workflow';
import { NodeOperationError } from 'n8n-workflow';
import { asReceipt, jsonObject, jsonParam, optionalString } from '../../params';

const RESULTS = ['found', 'absent', 'undecidable'];

/** The attempt that was looked up; the ledger applies the verdict to that attempt only. */
function attemptParam(ctx: IExecuteFunctions, i: number): number {
	const attemptRaw = ctx.getNodeParameter('attempt', i, '') as unknown;
	const attempt = typeof attemptRaw === 'number' ? attemptRaw : Number(String(attemptRaw ?? '').trim());
	if (attemptRaw === '' || attemptRaw === null || !Number.isInteger(attempt) || attempt < 1) {
		throw new NodeOperationError(ctx.getNode(), `"Attempt" must be a positive integer, got ${JSON.stringify(attemptRaw)}`, {
			itemIndex: i,
			description:
				"Use the attempt from Begin Step's Look Up item (default {{ $('Begin Step').item.json.durable.attempt }}): the ledger applies the verdict only to the attempt that was looked up.",
		});
	}
	return attempt;
}

function resultParam(ctx: IExecuteFunctions, i: number): string {
	const result = String(ctx.getNodeParameter('lookupResult', i, '') ?? '').trim();
	if (!RESULTS.includes(result)) {
		throw new NodeOperationError(ctx.getNode(), `"Result" must be found, absent or undecidable, got ${JSON.stringify(result)}`, {
			itemIndex: i,
			description:
				'For example {{ $json.op_key === $(\'Begin Step\').item.json.durable.operation_key ? "found" : "undecidable" }}: found only when the object the lookup returned carries this step\'s key; "absent" only when the lookup proves nothing was written (docs/builders.md).',
		});
	}
	return result;
}

/** The `lookup-result` body: verdict, attempt and evidence, plus remote ID and receipt when found. */
export function lookupBody(ctx: IExecuteFunctions, i: number, token: number): IDataObject {
	const attempt = attemptParam(ctx, i);
	const result = resultParam(ctx, i);
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
	return body;
}
