import type { INodeOutputConfiguration, INodeParameters } from 'n8n-workflow';

/**
 * The node's outputs for an operation (version 1.1; version 1 keeps its three fixed outputs):
 *
 * | operation | outputs |
 * |---|---|
 * | Begin Step | Proceed, Already Done, Needs Attention (+ Look Up with "Route Unknown Outcomes to Look Up") |
 * | Report Lookup | Proceed, Already Done, Needs Attention |
 * | Record Outcome | Done, Needs Attention |
 * | others | one output |
 *
 * n8n evaluates this function in the editor and at run time through the `outputs` expression
 * below, so it must not refer to anything outside its own body.
 */
export function configuredOutputs(parameters: INodeParameters, version: number): INodeOutputConfiguration[] {
	const operation = (parameters.operation as string | undefined) ?? 'beginStep';
	const options = (parameters.beginOptions ?? {}) as { routeToLookUp?: boolean };
	const main = (displayName?: string) => (displayName ? { type: 'main', displayName } : { type: 'main' }) as INodeOutputConfiguration;
	const gate = [main('Proceed'), main('Already Done'), main('Needs Attention')];
	if (operation === 'beginStep') return options.routeToLookUp === true ? [...gate, main('Look Up')] : gate;
	if (version < 1.1) return gate;
	if (operation === 'reportLookup') return gate;
	if (operation === 'recordOutcome') return [main('Done'), main('Needs Attention')];
	return [main()];
}

export const OUTPUTS_EXPRESSION = `={{(${configuredOutputs.toString()})($parameter, $nodeVersion)}}` as const;
