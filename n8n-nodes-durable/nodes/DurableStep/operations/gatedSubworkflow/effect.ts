import type { IExecuteFunctions } from 'n8n-workflow';
import type { LookUpVerdict, Performed, SideEffect, StepTicket } from '../gated/effect';
import { performedOf, thrownOf, verdictOf } from './answer';
import { runSubworkflow, subworkflowInput, type WorkflowRef } from './workflow';

function inputOf(ctx: IExecuteFunctions, i: number, ticket: StepTicket) {
	return subworkflowInput(ctx.getInputData()[i] ?? { json: {} }, ticket);
}

async function performOnce(ctx: IExecuteFunctions, i: number, ticket: StepTicket, ref: WorkflowRef, remoteIdPath: string, paths: string[]): Promise<Performed> {
	const input = inputOf(ctx, i, ticket);
	try {
		return performedOf(await runSubworkflow(ctx, ref, input), ticket, remoteIdPath, paths);
	} catch (error) {
		const thrown = thrownOf(error, ref);
		return 'declared' in thrown ? { ...thrown, json: { ...input.json, ...thrown.json } } : thrown;
	}
}

/** The lookup sub-workflow gets what the sub-workflow got (the item and the step's ticket). A throw is undecidable (lifecycle). */
async function lookUpOnce(ctx: IExecuteFunctions, i: number, ticket: StepTicket, ref: WorkflowRef): Promise<LookUpVerdict> {
	return verdictOf(await runSubworkflow(ctx, ref, inputOf(ctx, i, ticket)), ticket, ref);
}

export function subworkflowEffect(ref: WorkflowRef, remoteIdPath: string, paths: string[], lookUp?: WorkflowRef): SideEffect {
	return {
		perform: (ctx, i, ticket) => performOnce(ctx, i, ticket, ref, remoteIdPath, paths),
		lookUp: lookUp ? (ctx, i, ticket) => lookUpOnce(ctx, i, ticket, lookUp) : undefined,
	};
}
