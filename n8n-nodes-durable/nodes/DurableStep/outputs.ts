import type { INodeOutputConfiguration, INodeParameters } from 'n8n-workflow';

/**
 * The node's outputs for an operation and version:
 *
 * | operation | outputs |
 * |---|---|
 * | Begin Step | Proceed, Done Before, Attention (+ Look Up with "Route Unknown Outcomes to Look Up") |
 * | Report Lookup | Proceed, Done Before, Attention |
 * | Record Outcome | Done, Attention (1.1 and later) |
 * | Gated HTTP Request, Gated Sub-workflow | Done, Done Before (unless on Done, the default from 1.5), Attention |
 * | Start Job | one output; from 1.5 also Running Elsewhere |
 * | others | one output (1.1 and later) |
 *
 * The labels are the routes Already Done and Needs Attention (types.ts) in fewer letters.
 * Version 1 keeps three fixed outputs. From version 1.2, Attention is an output only with
 * "Needs Attention: Route to an Output" (parameter needsAttention = route); by default such items
 * fail the execution (attention.ts).
 *
 * n8n evaluates this function in the editor and at run time through the `outputs` expression
 * below, so it must not refer to anything outside its own body.
 */
export function configuredOutputs(parameters: INodeParameters, version: number): INodeOutputConfiguration[] {
	const operation = (parameters.operation as string | undefined) ?? 'beginStep';
	const options = (parameters.beginOptions ?? {}) as { routeToLookUp?: boolean };
	// Canvas labels that fit next to a 100 px node (about 76 px of text at 12 px: "Already Done"
	// and "Needs Attention" were cut to "Already Do..." / "Needs Atte..."). OUTPUT_ROUTES below
	// maps them back.
	const labels: Record<string, string> = { 'Already Done': 'Done Before', 'Needs Attention': 'Attention' };
	const main = (route?: string) =>
		(route ? { type: 'main', displayName: labels[route] ?? route } : { type: 'main' }) as INodeOutputConfiguration;
	const routed = version < 1.2 || parameters.needsAttention === 'route';
	// 1.5: Done Before items leave by Done unless the builder asks for their own output, so a
	// webhook that answers with the last node's item answers a re-run too (an empty Done output
	// made n8n answer HTTP 500 "No item to return was found"). Saved 1.4 nodes keep their output.
	const doneBefore = parameters.doneBefore ?? (version >= 1.5 ? 'done' : 'separate');
	const attention = routed ? [main('Needs Attention')] : [];
	const gate = [main('Proceed'), main('Already Done'), ...attention];
	if (operation === 'beginStep') return options.routeToLookUp === true ? [...gate, main('Look Up')] : gate;
	if (operation === 'gatedRequest' || operation === 'gatedSubworkflow') {
		// "Done Before Items: On the Done Output": one output for done now and done before, so a
		// step of several items (some sent now, some by an earlier run) runs the next node once.
		return doneBefore === 'done' ? [main('Done'), ...attention] : [main('Done'), main('Already Done'), ...attention];
	}
	// 1.5: a duplicate execution that met a live holder past Wait for Live Holder leaves by Running
	// Elsewhere (green, nothing written) instead of failing with running_elsewhere.
	if (operation === 'startJob' && version >= 1.5) return [main(), main('Running Elsewhere')];
	if (version < 1.1) return [main('Proceed'), main('Already Done'), main('Needs Attention')];
	if (operation === 'reportLookup') return gate;
	if (operation === 'recordOutcome') return [main('Done'), ...attention];
	return [main()];
}

/** The route (types.ts) of each canvas label configuredOutputs gives. */
export const OUTPUT_ROUTES: Readonly<Record<string, string>> = {
	Proceed: 'Proceed',
	'Done Before': 'Already Done',
	Attention: 'Needs Attention',
	'Look Up': 'Look Up',
	Done: 'Done',
	'Running Elsewhere': 'Running Elsewhere',
};

export const OUTPUTS_EXPRESSION = `={{(${configuredOutputs.toString()})($parameter, $nodeVersion)}}` as const;
