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
		// The item leaves on Attention as it went in, with what the failure said.
		const thrown = thrownOf(error, ref);
		return { ...thrown, json: { ...input.json, ...thrown.json } };
	}
}

/**
 * The lookup sub-workflow gets what the sub-workflow got (its input and the step's ticket). If it
 * throws, the lookup proved nothing: the step stays unknown for the next run (lifecycle.ts).
 */
async function lookUpOnce(ctx: IExecuteFunctions, base: INodeExecutionData, ticket: StepTicket, ref: WorkflowRef): Promise<LookUpVerdict> {
	return verdictOf(await runSubworkflow(ctx, ref, subworkflowInput(base, ticket)), ticket, ref);
}

/** `base`: item i's input to the sub-workflow (the input item or the custom input), before the ticket is added. */
export function subworkflowEffect(
	base: INodeExecutionData,
	ref: WorkflowRef,
	remoteIdPath: string,
	paths: string[],
	lookUp?: WorkflowRef,
	inFlightMs = 0,
): SideEffect {
	return {
		inFlightMs,
		perform: (ctx, _i, ticket) => performOnce(ctx, base, ticket, ref, remoteIdPath, paths),
		lookUp: lookUp ? (ctx, _i, ticket) => lookUpOnce(ctx, base, ticket, lookUp) : undefined,
	};
}
