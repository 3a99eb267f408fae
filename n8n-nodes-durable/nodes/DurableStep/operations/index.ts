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

/** The node's operations by the value of its Operation field (description.ts). */
export const OPERATIONS: Record<string, DurableOperation> = {
	startJob,
	beginStep,
	gatedRequest,
	gatedSubworkflow,
	recordOutcome,
	saveCheckpoint,
	reconcile,
	reportLookup,
	waitForApproval,
};
