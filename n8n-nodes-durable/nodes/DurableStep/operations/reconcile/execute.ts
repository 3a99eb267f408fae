import type { IDataObject, IExecuteFunctions } from 'n8n-workflow';
import { requiredString } from '../../params';
import { ledgerCall, operationPath } from '../../transport';
import { PROCEED, type DurableOperation, type StepResult } from '../../types';

/** `POST /v1/operations/{key}/reconcile` for one operation; the item is replaced by the answer. */
export async function reconcileItem(ctx: IExecuteFunctions, i: number): Promise<StepResult> {
	const key = requiredString(ctx, 'operationKey', i, 'Operation Key');
	const answer = await ledgerCall(ctx, 'POST', operationPath(key, 'reconcile'), {}, i, `Reconciling ${key}`);
	const operation = (answer.operation as IDataObject) ?? {};
	return {
		output: PROCEED,
		json: { operation_key: key, state: operation.state ?? null, remote_id: operation.remote_id ?? null, ...answer },
	};
}

export const reconcile: DurableOperation = { gate: false, start: async () => reconcileItem };
