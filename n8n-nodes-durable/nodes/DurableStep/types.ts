import type { IDataObject } from 'n8n-workflow';

/**
 * Where an item goes, by output name. Which outputs a node has depends on its operation and
 * version (outputs.ts); the node maps the name to the output's index.
 */
export type Route = 'Proceed' | 'Already Done' | 'Needs Attention' | 'Look Up' | 'Done';

export interface StepResult {
	output: Route;
	json: IDataObject;
}

export const PROCEED: Route = 'Proceed';
export const ALREADY_DONE: Route = 'Already Done';
export const NEEDS_ATTENTION: Route = 'Needs Attention';
export const LOOK_UP: Route = 'Look Up';
export const DONE: Route = 'Done';
