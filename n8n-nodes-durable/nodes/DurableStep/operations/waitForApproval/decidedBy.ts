import type { IDataObject, INodeExecutionData } from 'n8n-workflow';
import type { StepResult } from '../../types';

/**
 * Who decided, from the ledger's resume call: after the Wait node (Resume: On Webhook Call) the
 * item is that call, `{headers, params, query, body}`, and the body is the ledger's
 * `{decision, reason, operation_key, decided_by: [{name, decision, at, door}]}`. Only a body for
 * this very step counts: an item that merely has a `body` field says nothing about approvals.
 */
export function decidedByOf(item: INodeExecutionData, operationKey: unknown): IDataObject[] | undefined {
	const body = item.json.body as IDataObject | undefined;
	if (!body || typeof body !== 'object' || Array.isArray(body)) return undefined;
	if (typeof operationKey !== 'string' || !operationKey || body.operation_key !== operationKey) return undefined;
	return Array.isArray(body.decided_by) ? (body.decided_by as IDataObject[]) : undefined;
}

/**
 * The step's answer with `durable.decided_by` when its input item is the resume call for it: the
 * step that asked again after the wait (Begin Step, Gated HTTP Request, Gated Sub-Workflow) says
 * on Done, Proceed or Needs Attention who approved or denied it, when and through which door.
 */
export function withDecidedBy(item: INodeExecutionData, result: StepResult): StepResult {
	const durable = result.json.durable as IDataObject | undefined;
	if (!durable || typeof durable !== 'object') return result;
	const decidedBy = decidedByOf(item, durable.operation_key);
	if (decidedBy) durable.decided_by = decidedBy;
	return result;
}
