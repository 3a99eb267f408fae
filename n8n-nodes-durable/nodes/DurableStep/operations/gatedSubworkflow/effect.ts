import type { IExecuteFunctions, INodeExecutionData } from 'n8n-workflow';
import type { LookUpVerdict, Performed, SideEffect, StepTicket } from '../gated/effect';
import { performedOf, thrownOf, verdictOf } from './answer';
import { runSubworkflow, subworkflowInput, type WorkflowRef } from './workflow';

async function performOnce(
	ctx: IExecuteFunctions,
	base: INodeExecutionData,
	ticket: StepTicket,
	ref: WorkflowRef,
	remoteIdPath: string,
	paths: string[],
): Promise<Performed> {
	const input = subworkflowInput(base, ticket);
	try {
		return performedOf(await runSubworkflow(ctx, ref, input), ticket, remoteIdPath, paths);
	} catch (error) {
		const thrown = thrownOf(error, ref);
		return 'declared' in thrown ? { ...thrown, json: { ...input.json, ...thrown.json } } : thrown;
	}
}

/** The lookup sub-workflow gets what the sub-workflow got (the item and the step's ticket). A throw is undecidable (lifecycle). */
async function lookUpOnce(ctx: IExecuteFunctions, base: INodeExecutionData, ticket: StepTicket, ref: WorkflowRef): Promise<LookUpVerdict> {
	return verdictOf(await runSubworkflow(ctx, ref, subworkflowInput(base, ticket)), ticket, ref);
}

/** `base`: item i's input to the sub-workflow (the input item or the custom input), before the ticket is added. */
export function subworkflowEffect(base: INodeExecutionData, ref: WorkflowRef, remoteIdPath: string, paths: string[], lookUp?: WorkflowRef): SideEffect {
	return {
		perform: (ctx, _i, ticket) => performOnce(ctx, base, ticket, ref, remoteIdPath, paths),
		lookUp: lookUp ? (ctx, _i, ticket) => lookUpOnce(ctx, base, ticket, lookUp) : undefined,
	};
}
