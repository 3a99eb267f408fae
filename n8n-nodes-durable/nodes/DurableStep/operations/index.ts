import type { DurableOperation } from '../types';
import { beginStep } from './beginStep/execute';
import { gatedRequest } from './gatedRequest/execute';
import { gatedSubworkflow } from './gatedSubworkflow/execute';
import { reconcile } from './reconcile/execute';
import { recordOutcome } from './recordOutcome/execute';
import { reportLookup } from './reportLookup/execute';
import { saveCheckpoint } from './saveCheckpoint/execute';
import { startJob } from './startJob/execute';
import { waitForApproval } from './waitForApproval/execute';

/** One operation of the node: its entry in the Operation selector and the module that runs it. */
export interface OperationEntry {
	value: string;
	name: string;
	description: string;
	run: DurableOperation;
}

/**
 * Every operation, declared once, in the order a workflow uses them (not alphabetical: Start Job
 * comes first). The selector (description.ts), the subtitle and the router all read this list.
 */
export const OPERATION_LIST: OperationEntry[] = [
	{
		value: 'startJob',
		name: 'Start Job',
		description: 'Create or get the job and take its lease (fencing token)',
		run: startJob,
	},
	{
		value: 'gatedRequest',
		name: 'Gated HTTP Request',
		description:
			'Send an HTTP request exactly once: begin, send, record and route Done / Done Before in one node, with a built-in lookup for unknown outcomes',
		run: gatedRequest,
	},
	{
		value: 'gatedSubworkflow',
		name: 'Gated Sub-Workflow',
		description:
			'Run a sub-workflow exactly once (any nodes: Postgres, Send Email, Slack...): begin, run, record and route Done / Done Before in one node, with a lookup sub-workflow for unknown outcomes',
		run: gatedSubworkflow,
	},
	{
		value: 'beginStep',
		name: 'Begin Step',
		description: 'Gate a side effect: proceed, reuse the stored receipt, or stop for attention',
		run: beginStep,
	},
	{
		value: 'recordOutcome',
		name: 'Record Outcome',
		description: 'Record what the side effect did: confirmed, failed or unknown',
		run: recordOutcome,
	},
	{
		value: 'saveCheckpoint',
		name: 'Save Checkpoint',
		description: 'Save the phase the job reached, with evidence',
		run: saveCheckpoint,
	},
	{
		value: 'waitForApproval',
		name: 'Wait for Approval',
		description:
			'Register this execution with the ledger so that the Wait node after it is resumed when an approver decides',
		run: waitForApproval,
	},
	{
		value: 'reportLookup',
		name: 'Report Lookup',
		description:
			"Tell the ledger what your own lookup found for a step on Begin Step's Look Up output: found, absent or undecidable",
		run: reportLookup,
	},
	{
		value: 'reconcile',
		name: 'Reconcile',
		description: 'Ask the ledger to reconcile one operation with the remote system now',
		run: reconcile,
	},
];

/** The node's operations by the value of its Operation field. */
export const OPERATIONS: Record<string, DurableOperation> = Object.fromEntries(
	OPERATION_LIST.map((o) => [o.value, o.run]),
);

/**
 * The selector's options. `action` is the name again, so the editor's action list, the docs and
 * the subtitle agree.
 */
export const OPERATION_OPTIONS = OPERATION_LIST.map(({ name, value, description }) => ({
	name,
	value,
	description,
	action: name,
}));
