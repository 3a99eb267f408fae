import type { IDataObject, IExecuteFunctions, INodeExecutionData } from 'n8n-workflow';
import { NodeOperationError } from 'n8n-workflow';
import type { StepTicket } from '../gated/effect';

/** A sub-workflow chosen in a workflow selector: its ID, and its name as the editor cached it. */
export interface WorkflowRef {
	id: string;
	name: string;
}

/**
 * The workflow a selector names. n8n saves a workflow selector as a resource locator
 * `{__rl: true, mode: 'list' | 'id', value, cachedResultName}` (n8n's own Execute Workflow node
 * reads `.value`); an expression may give the plain ID.
 */
export function workflowRef(ctx: IExecuteFunctions, name: string, i: number, label: string): WorkflowRef {
	const raw = ctx.getNodeParameter(name, i, '') as unknown;
	const locator: IDataObject = raw && typeof raw === 'object' ? (raw as IDataObject) : { value: raw as string };
	const id = locator.value === undefined || locator.value === null ? '' : String(locator.value).trim();
	if (!id) {
		throw new NodeOperationError(ctx.getNode(), `"${label}" is empty`, {
			itemIndex: i,
			description: `Choose the workflow in "${label}" (From list, or By ID: the ID in the workflow's URL).`,
		});
	}
	return { id, name: String(locator.cachedResultName ?? id) };
}

/** What a sub-workflow receives: the input item, its `durable` replaced by the step's ticket. */
export function subworkflowInput(item: INodeExecutionData, ticket: StepTicket): INodeExecutionData {
	const json: IDataObject = { ...item.json, durable: { ...ticket } };
	return item.binary ? { json, binary: item.binary } : { json };
}

/** A sub-workflow's answer: the first item of its last node's first output (null: none). */
export interface SubworkflowAnswer {
	executionId: string;
	first: IDataObject | null;
	/** The sub-workflow went into a Wait node: it has not finished. */
	waiting: boolean;
}

/**
 * Runs the sub-workflow once with this one item and waits for it to finish, as n8n's Execute
 * Workflow node does ("Run once for each item", Wait For Sub-Workflow Completion on): the published
 * version outside manual runs, the draft in the editor. `shouldResume: false`: the parent does not
 * wait for a sub-workflow that waits; this node records such an attempt as unknown instead.
 */
export async function runSubworkflow(ctx: IExecuteFunctions, ref: WorkflowRef, input: INodeExecutionData): Promise<SubworkflowAnswer> {
	const result = await ctx.executeWorkflow({ id: ref.id }, [input], undefined, {
		parentExecution: { executionId: String(ctx.getExecutionId() ?? ''), workflowId: String(ctx.getWorkflow().id ?? ''), shouldResume: false },
		executionMode: ctx.getMode(),
	});
	const first = result.data?.[0]?.[0]?.json ?? null;
	return { executionId: String(result.executionId ?? ''), first, waiting: !!result.waitTill };
}

/** The sub-execution's ID that n8n attached to the error thrown for a failed sub-workflow. */
export function executionIdOf(error: unknown): string | undefined {
	const id = (error as { executionId?: unknown } | null)?.executionId;
	return id === undefined || id === null || id === '' ? undefined : String(id);
}
