import type { IDataObject } from 'n8n-workflow';

/** Output index: 0 Proceed / main, 1 Already Done, 2 Needs Attention. */
export interface StepResult {
	output: 0 | 1 | 2;
	json: IDataObject;
}

export const PROCEED = 0;
export const ALREADY_DONE = 1;
export const NEEDS_ATTENTION = 2;
