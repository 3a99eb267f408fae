import type { IDataObject, IExecuteFunctions, INodeExecutionData, INodeParameters, NodeOperationError } from 'n8n-workflow';
import { attentionError, routesAttention } from './attention';
import { asNodeError } from './errors';
import { EDITOR_DEFAULTS_FROM } from './editorDefaults';
import { HANDOVER_S, LIVE_S, beat, holderOf, wasCarried, type Holder } from './liveness';
import { OUTPUT_ROUTES, configuredOutputs } from './outputs';
import { doneBeforeDefault } from './operations/gated/fields';
import { CREDENTIAL_NAME } from './transport';
import { DONE, NEEDS_ATTENTION, PROCEED, type DurableOperation, type Route } from './types';

/** The names of this node's outputs, in order, for the operation and the node's version. */
function outputLayout(ctx: IExecuteFunctions, operation: string): Route[] {
	const version = Number(ctx.getNode().typeVersion ?? 1);
	const parameters = {
		operation,
		beginOptions: ctx.getNodeParameter('beginOptions', 0, {}) as INodeParameters,
		needsAttention: routesAttention(ctx, operation) ? 'route' : 'fail',
		doneBefore: ctx.getNodeParameter('doneBefore', 0, doneBeforeDefault(version)) as string,
	};
	return configuredOutputs(parameters, version).map((o) => (OUTPUT_ROUTES[o.displayName ?? PROCEED] ?? PROCEED) as Route);
}

/** Where a failed item goes with Continue On Fail; null: on none of the outputs. */
function failedItemRoute(ctx: IExecuteFunctions, operation: DurableOperation, layout: Route[]): Route | null {
	// Never on Proceed: an error item must not trigger the side effect. With
	// "Continue (using error output)" n8n moves it to the error output.
	// Record Outcome 1.1: an error item is not Done either.
	if (!operation.gate && !layout.includes(DONE)) return PROCEED;
	if (layout.includes(NEEDS_ATTENTION)) return NEEDS_ATTENTION;
	// Version 1.2 without a Needs Attention output: n8n moves an error item from any output to the
	// error output (only items shaped {error, details}), so the first one is safe there. With
	// "Continue (using regular output)" no output is safe: the item is left out, with a hint.
	return ctx.getNode().onError === 'continueErrorOutput' ? layout[0] : null;
}

function errorItem(error: unknown, i: number): INodeExecutionData {
	return {
		json: { error: (error as Error).message, details: (error as NodeOperationError).description ?? null },
		pairedItem: { item: i },
	};
}

/** The error for an item bound for Needs Attention when the node has no such output (1.2). */
async function attentionFailure(ctx: IExecuteFunctions, i: number, durable: IDataObject) {
	let baseUrl = '';
	try {
		baseUrl = String((await ctx.getCredentials(CREDENTIAL_NAME, i)).baseUrl ?? '');
	} catch {
		// The message names the console path without the host.
	}
	return attentionError(ctx, i, durable ?? {}, baseUrl);
}

/**
 * Node 1.5: Begin Step and Record Outcome tell the ledger about the holder's liveness as the gated
 * nodes do (liveness.ts), so that a duplicate execution of the job waits for the write between
 * them and goes on soon after it: a dispatched step is worked on for LIVE_S (the builder's node
 * writes now; one beat, Begin Step does not run during the write), a recorded or done-before one
 * leaves HANDOVER_S. Without them a duplicate waited out the LIVE_S Start Job began with.
 */
async function beatForSteps(ctx: IExecuteFunctions, name: string, outputs: INodeExecutionData[][]) {
	if (name !== 'beginStep' && name !== 'recordOutcome') return;
	const items = outputs.flat();
	const holders = new Map<string, { holder: Holder; liveS: number }>();
	for (const item of items) {
		const durable = (item.json.durable ?? {}) as IDataObject;
		const jobId = durable.job_id;
		const token = durable.fencing_token;
		if (typeof jobId !== 'string' || typeof token !== 'number') continue;
		const liveS = name === 'beginStep' && durable.decision === 'dispatch' ? LIVE_S : HANDOVER_S;
		const key = `${jobId}\u0000${token}`;
		const known = holders.get(key);
		if (!known) holders.set(key, { holder: holderOf(ctx, ctx.getInputData()[0]?.json ?? {}, jobId, token), liveS });
		else known.liveS = Math.max(known.liveS, liveS);
	}
	// A beat that rode on the node's begin or confirm (liveness.ts sendCarrying) is not sent again.
	const due = [...holders.values()].filter(({ holder, liveS }) => !wasCarried(ctx, holder.jobId, holder.token, liveS));
	await Promise.all(due.map(async ({ holder, liveS }) => await beat(ctx, holder, liveS)));
}

/** Answers every input item with the operation and puts each on the output its answer names. */
export async function runOperation(
	ctx: IExecuteFunctions,
	name: string,
	operation: DurableOperation,
): Promise<INodeExecutionData[][]> {
	const items = ctx.getInputData();
	const step = await operation.start(ctx, items);
	const layout = outputLayout(ctx, name);
	const outputs: INodeExecutionData[][] = layout.map(() => []);
	const at = (route: Route) => Math.max(0, layout.indexOf(route));
	let dropped = 0;
	for (let i = 0; i < items.length; i++) {
		try {
			const result = await step(ctx, i, items[i]);
			if (result.output === NEEDS_ATTENTION && !layout.includes(NEEDS_ATTENTION)) {
				throw await attentionFailure(ctx, i, result.json.durable as IDataObject);
			}
			outputs[at(result.output)].push({ json: result.json, pairedItem: { item: i } });
		} catch (error) {
			if (!ctx.continueOnFail()) throw asNodeError(ctx, error, i);
			const route = failedItemRoute(ctx, operation, layout);
			if (route === null) dropped++;
			else outputs[at(route)].push(errorItem(error, i));
		}
	}
	if (Number(ctx.getNode().typeVersion ?? 1) >= EDITOR_DEFAULTS_FROM) await beatForSteps(ctx, name, outputs);
	if (dropped) {
		ctx.addExecutionHints({
			type: 'warning',
			location: 'outputPane',
			message: `${dropped} item(s) failed and are on no output: with "Continue (using regular output)" they would reach Proceed. Use "Continue (using error output)", or set "Needs Attention" to "Route to an Output".`,
		});
	}
	return outputs;
}
