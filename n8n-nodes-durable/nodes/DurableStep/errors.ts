import type { IExecuteFunctions } from 'n8n-workflow';
import { NodeApiError, NodeOperationError } from 'n8n-workflow';

/** The error that fails the node for item i. */
export function asNodeError(ctx: IExecuteFunctions, error: unknown, i: number): NodeApiError | NodeOperationError {
	// NodeApiError / NodeOperationError already carry the itemIndex and a description.
	return error instanceof NodeApiError || error instanceof NodeOperationError
		? error
		: new NodeOperationError(ctx.getNode(), error as Error, { itemIndex: i });
}

export function unknownOperation(ctx: IExecuteFunctions, operation: string): NodeOperationError {
	return new NodeOperationError(ctx.getNode(), `Unknown operation "${operation}"`, {
		description:
			'Choose one of Start Job, Gated HTTP Request, Gated Sub-Workflow, Begin Step, Report Lookup, Record Outcome, Save Checkpoint, Reconcile, Wait for Approval.',
	});
}
