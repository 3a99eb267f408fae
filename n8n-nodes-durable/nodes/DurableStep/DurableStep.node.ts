import type {
	IExecuteFunctions,
	INodeExecutionData,
	INodeParameters,
	INodeType,
	INodeTypeDescription,
} from 'n8n-workflow';
import { NodeApiError, NodeConnectionTypes, NodeOperationError } from 'n8n-workflow';
import { properties } from './description';
import { beginBatch, beginFromSlot, beginStep } from './operations/beginStep';
import { recordOutcome } from './operations/recordOutcome';
import { reconcile } from './operations/reconcile';
import { reportLookup } from './operations/reportLookup';
import { saveCheckpoint } from './operations/saveCheckpoint';
import { startJob } from './operations/startJob';
import { waitForApproval } from './operations/waitForApproval';
import { OUTPUTS_EXPRESSION, configuredOutputs } from './outputs';
import { NEEDS_ATTENTION, PROCEED, type Route, type StepResult } from './types';

type Operation = (ctx: IExecuteFunctions, i: number, item: INodeExecutionData) => Promise<StepResult>;

const OPERATIONS: Record<string, Operation> = {
	startJob,
	beginStep,
	recordOutcome,
	saveCheckpoint,
	reconcile,
	reportLookup,
	waitForApproval,
};

/** Operations whose failing items must never reach the first output (it triggers the side effect). */
const GATES = new Set(['beginStep', 'reportLookup']);

export class DurableStep implements INodeType {
	description: INodeTypeDescription = {
		displayName: 'Durable Step',
		name: 'durableStep',
		icon: { light: 'file:../../icons/durable.svg', dark: 'file:../../icons/durable.dark.svg' },
		group: ['transform'],
		// 1.1: Record Outcome routes Done / Needs Attention, Report Lookup, one output for the other
		// operations. 1 keeps its three fixed outputs (Record Outcome answers everything on the first).
		version: [1, 1.1],
		defaultVersion: 1.1,
		subtitle: '={{ $parameter["operation"] === "beginStep" ? "Begin: " + $parameter["action"] : $parameter["operation"] }}',
		description: 'Run side effects exactly once: gate, record, checkpoint and reconcile them in the Durable Steps ledger',
		defaults: {
			name: 'Durable Step',
		},
		usableAsTool: true,
		inputs: [NodeConnectionTypes.Main],
		// Per operation (outputs.ts): Begin Step Proceed / Already Done / Needs Attention (+ Look Up),
		// Report Lookup the same three, Record Outcome Done / Needs Attention.
		outputs: OUTPUTS_EXPRESSION,
		credentials: [{ name: 'durableLedgerApi', required: true }],
		properties,
	};

	async execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
		const items = this.getInputData();
		const operation = this.getNodeParameter('operation', 0) as string;
		let run = OPERATIONS[operation];
		if (!run) {
			throw new NodeOperationError(this.getNode(), `Unknown operation "${operation}"`, {
				description:
					'Choose one of Start Job, Begin Step, Report Lookup, Record Outcome, Save Checkpoint, Reconcile, Wait for Approval.',
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
		const node = this.getNode();
		const layout = configuredOutputs(
			{ operation, beginOptions: this.getNodeParameter('beginOptions', 0, {}) as INodeParameters },
			Number(node.typeVersion ?? 1),
		).map((o) => o.displayName ?? PROCEED);
		const outputs: INodeExecutionData[][] = layout.map(() => []);
		const at = (route: Route) => Math.max(0, layout.indexOf(route));

		for (let i = 0; i < items.length; i++) {
			try {
				const result = await run(this, i, items[i]);
				outputs[at(result.output)].push({ json: result.json, pairedItem: { item: i } });
			} catch (error) {
				if (this.continueOnFail()) {
					// Never on Proceed: an error item must not trigger the side effect. With
					// "Continue (using error output)" n8n moves it to the error output.
					// Record Outcome 1.1: an error item is not Done either.
					const target = GATES.has(operation) || layout.includes('Done') ? NEEDS_ATTENTION : PROCEED;
					outputs[at(target)].push({
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
