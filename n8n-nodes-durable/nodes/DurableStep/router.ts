import type { IExecuteFunctions, INodeExecutionData, INodeParameters, NodeOperationError } from 'n8n-workflow';
import { asNodeError } from './errors';
import { configuredOutputs } from './outputs';
import { DONE, NEEDS_ATTENTION, PROCEED, type DurableOperation, type Route } from './types';

/** The names of this node's outputs, in order, for the operation and the node's version. */
function outputLayout(ctx: IExecuteFunctions, operation: string): Route[] {
	const parameters = { operation, beginOptions: ctx.getNodeParameter('beginOptions', 0, {}) as INodeParameters };
	const version = Number(ctx.getNode().typeVersion ?? 1);
	return configuredOutputs(parameters, version).map((o) => (o.displayName ?? PROCEED) as Route);
}

/** Where a failed item goes with Continue On Fail. */
function failedItemRoute(operation: DurableOperation, layout: Route[]): Route {
	// Never on Proceed: an error item must not trigger the side effect. With
	// "Continue (using error output)" n8n moves it to the error output.
	// Record Outcome 1.1: an error item is not Done either.
	return operation.gate || layout.includes(DONE) ? NEEDS_ATTENTION : PROCEED;
}

function errorItem(error: unknown, i: number): INodeExecutionData {
	return {
		json: { error: (error as Error).message, details: (error as NodeOperationError).description ?? null },
		pairedItem: { item: i },
	};
}

/** Answers every input item with the operation and puts each on the output its answer names. */
export async function runOperation(
	ctx: IExecuteFunctions,
	name: string,
	operation: DurableOperation,
): Promise<INodeExecutionData[][]> {
	const items = ctx.getInputData();
	const step = await operation.start(ctx, items);
	const layout = outputLayout(ctx, name);
	const outputs: INodeExecutionData[][] = layout.map(() => []);
	const at = (route: Route) => Math.max(0, layout.indexOf(route));
	for (let i = 0; i < items.length; i++) {
		try {
			const result = await step(ctx, i, items[i]);
			outputs[at(result.output)].push({ json: result.json, pairedItem: { item: i } });
		} catch (error) {
			if (!ctx.continueOnFail()) throw asNodeError(ctx, error, i);
			outputs[at(failedItemRoute(operation, layout))].push(errorItem(error, i));
		}
	}
	return outputs;
}
