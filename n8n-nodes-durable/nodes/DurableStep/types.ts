import type { IDataObject, IExecuteFunctions, INodeExecutionData } from 'n8n-workflow';

/**
 * Where an item goes, by output name. Which outputs a node has depends on its operation and
 * version (outputs.ts); the node maps the name to the output's index.
 */
export type Route = 'Proceed' | 'Already Done' | 'Needs Attention' | 'Look Up' | 'Done' | 'Running Elsewhere';

export interface StepResult {
	output: Route;
	json: IDataObject;
	/** Already Done: the receipt as it was stored (without the remote_id the ledger's answer adds). */
	stored?: IDataObject;
}

export const PROCEED: Route = 'Proceed';
export const ALREADY_DONE: Route = 'Already Done';
export const NEEDS_ATTENTION: Route = 'Needs Attention';
export const LOOK_UP: Route = 'Look Up';
export const DONE: Route = 'Done';
export const RUNNING_ELSEWHERE: Route = 'Running Elsewhere';

/** Answers one input item; throws for an item that fails. */
export type ItemStep = (ctx: IExecuteFunctions, i: number, item: INodeExecutionData) => Promise<StepResult>;

/** What every operation folder exports; the node routes the table of them (operations/index.ts). */
export interface DurableOperation {
	/** A gate's failed items never reach its first output (Proceed triggers the side effect). */
	gate: boolean;
	/**
	 * Called once per execution with all input items, before any item is answered: returns
	 * the step that answers each item. May fail the node (a thrown error stops it).
	 */
	start(ctx: IExecuteFunctions, items: INodeExecutionData[]): Promise<ItemStep>;
}
