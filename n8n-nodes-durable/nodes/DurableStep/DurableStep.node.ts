import type { IExecuteFunctions, INodeExecutionData, INodeType, INodeTypeDescription } from 'n8n-workflow';
import { NodeConnectionTypes } from 'n8n-workflow';
import { SUBTITLE, credentials, properties } from './description';
import { unknownOperation } from './errors';
import { OPERATIONS } from './operations';
import { OUTPUTS_EXPRESSION } from './outputs';
import { runOperation } from './router';

export class DurableStep implements INodeType {
	description: INodeTypeDescription = {
		displayName: 'Durable Step',
		name: 'durableStep',
		icon: { light: 'file:../../icons/durable.svg', dark: 'file:../../icons/durable.dark.svg' },
		group: ['transform'],
		// 1.5: a workflow built in the editor works with the defaults (editorDefaults.ts): the gated
		// operations, Begin Step and Save Checkpoint find their job whatever Start Job is named; Done
		// Before items leave by Done with the whole answer as receipt; Start Job's Running Elsewhere
		// output (a duplicate past Wait for Live Holder leaves green, nothing written).
		// 1.4: liveness (liveness.ts): gated nodes send heartbeats while they work, and Start Job's
		// takeover waits for a holder that is still beating (Wait for Live Holder, 30 s) instead of
		// fencing it out; a dead holder is taken over at once, as before.
		// 1.3: Report Lookup's Result has no default (it was Found: a node left at its defaults
		// reported every lookup as found).
		// 1.2: Needs Attention fails the execution unless routed to an output; Begin Step's Payload
		// defaults to the input item without the fields Durable Step put there (attention.ts,
		// beginStep/payload.ts). n8n does not save parameters equal to their default, so changed
		// defaults need a new version: workflows saved with 1 or 1.1 keep their behaviour.
		// 1.1: Record Outcome routes Done / Needs Attention, Report Lookup, one output for the other
		// operations. 1 keeps its three fixed outputs (Record Outcome answers everything on the first).
		version: [1, 1.1, 1.2, 1.3, 1.4, 1.5],
		defaultVersion: 1.5,
		subtitle: SUBTITLE,
		description: 'Run side effects exactly once: gate, record, checkpoint and reconcile them in the Durable Steps ledger',
		defaults: {
			name: 'Durable Step',
		},
		usableAsTool: true,
		inputs: [NodeConnectionTypes.Main],
		// Per operation (outputs.ts): Begin Step Proceed / Already Done / Needs Attention (+ Look Up),
		// Report Lookup the same three, Record Outcome Done / Needs Attention, Start Job (1.5) its
		// job / Running Elsewhere.
		outputs: OUTPUTS_EXPRESSION,
		credentials,
		properties,
	};

	async execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
		const name = this.getNodeParameter('operation', 0) as string;
		const operation = Object.prototype.hasOwnProperty.call(OPERATIONS, name) ? OPERATIONS[name] : undefined;
		if (!operation) throw unknownOperation(this, name);
		return await runOperation(this, name, operation);
	}
}
