import type {
	IExecuteFunctions,
	INodeExecutionData,
	INodeType,
	INodeTypeDescription,
} from 'n8n-workflow';
import { NodeApiError, NodeConnectionTypes, NodeOperationError } from 'n8n-workflow';
import { properties } from './description';
import { beginBatch, beginFromSlot, beginStep } from './operations/beginStep';
import { recordOutcome } from './operations/recordOutcome';
import { reconcile } from './operations/reconcile';
import { saveCheckpoint } from './operations/saveCheckpoint';
import { startJob } from './operations/startJob';
import { waitForApproval } from './operations/waitForApproval';
import { NEEDS_ATTENTION, PROCEED, type StepResult } from './types';

type Operation = (ctx: IExecuteFunctions, i: number, item: INodeExecutionData) => Promise<StepResult>;

const OPERATIONS: Record<string, Operation> = {
	startJob,
	beginStep,
	recordOutcome,
	saveCheckpoint,
	reconcile,
	waitForApproval,
};

export class DurableStep implements INodeType {
	description: INodeTypeDescription = {
		displayName: 'Durable Step',
		name: 'durableStep',
		icon: { light: 'file:../../icons/durable.svg', dark: 'file:../../icons/durable.dark.svg' },
		group: ['transform'],
		version: 1,
		subtitle: '={{ $parameter["operation"] === "beginStep" ? "Begin: " + $parameter["action"] : $parameter["operation"] }}',
		description: 'Run side effects exactly once: gate, record, checkpoint and reconcile them in the Durable Steps ledger',
		defaults: {
			name: 'Durable Step',
		},
		usableAsTool: true,
		// Begin Step routes to all three outputs; every other operation answers on the first.
		inputs: [NodeConnectionTypes.Main],
		outputs: [NodeConnectionTypes.Main, NodeConnectionTypes.Main, NodeConnectionTypes.Main],
		outputNames: ['Proceed', 'Already Done', 'Needs Attention'],
		credentials: [{ name: 'durableLedgerApi', required: true }],
		properties,
	};

	async execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
		const items = this.getInputData();
		const operation = this.getNodeParameter('operation', 0) as string;
		let run = OPERATIONS[operation];
		if (!run) {
			throw new NodeOperationError(this.getNode(), `Unknown operation "${operation}"`, {
				description: 'Choose one of Start Job, Begin Step, Record Outcome, Save Checkpoint, Reconcile, Wait for Approval.',
			});
		}
		// NodeApiError / NodeOperationError already carry the itemIndex and a description.
		const failure = (error: unknown, i: number) =>
			error instanceof NodeApiError || error instanceof NodeOperationError
				? error
				: new NodeOperationError(this.getNode(), error as Error, { itemIndex: i });

		if (operation === 'beginStep' && items.length > 1) {
			// Many items: their begins go to the ledger in one batch request (per 100 items); each
			// item is then routed exactly as if it had been begun on its own.
			const batch = await beginBatch(this, items);
			if ('failedAt' in batch) throw failure(batch.error, batch.failedAt);
			run = async (ctx, i, item) => await beginFromSlot(ctx, i, item, batch.slots[i]);
		}
		const outputs: INodeExecutionData[][] = [[], [], []];

		for (let i = 0; i < items.length; i++) {
			try {
				const result = await run(this, i, items[i]);
				outputs[result.output].push({ json: result.json, pairedItem: { item: i } });
			} catch (error) {
				if (this.continueOnFail()) {
					// Never on Proceed: an error item must not trigger the side effect. With
					// "Continue (using error output)" n8n moves it to the error output.
					const target = operation === 'beginStep' ? NEEDS_ATTENTION : PROCEED;
					outputs[target].push({
						json: { error: (error as Error).message, details: (error as NodeOperationError).description ?? null },
						pairedItem: { item: i },
					});
					continue;
				}
				throw failure(error, i);
			}
		}
		return outputs;
	}
}
