import type { INodeProperties } from 'n8n-workflow';
import { EDITOR_DEFAULTS_FROM, before15, from15 } from '../../editorDefaults';
import { show } from '../../sharedFields';

/** The one-node operations: each runs its side effect itself between begin and record. */
export const GATED_OPERATIONS = ['gatedRequest', 'gatedSubworkflow'];

/** Action: the step's name in the job, as Begin Step's. */
export const gatedActionField: INodeProperties = {
	displayName: 'Action',
	name: 'action',
	type: 'string',
	required: true,
	default: '',
	placeholder: 'create_order',
	description: 'Name of the side effect, unique within the job (for example create_order, notify:customer)',
	displayOptions: show(...GATED_OPERATIONS),
};

/** Where Done Before items go by default: their own output before 1.5, the Done output from 1.5. */
export function doneBeforeDefault(version: number): string {
	return version >= EDITOR_DEFAULTS_FROM ? 'done' : 'separate';
}

const doneBeforeOptions = [
	{
		name: 'On Their Own Output',
		value: 'separate',
		description: 'Done Before is an output of its own: wire it where an earlier run\'s result should go',
	},
	{
		name: 'On the Done Output',
		value: 'done',
		description:
			'Done and Done Before items leave by one output (durable.decision tells them apart), so the next node runs once for a step of several items',
	},
];

/**
 * Where Done Before items go: their own output (the default before 1.5) or the Done output (the
 * default from 1.5: a webhook answering with the last node's item answers a re-run too). Two
 * entries of one parameter, one per version range, because a changed default needs a new version.
 */
export const doneBeforeFields: INodeProperties[] = [
	{
		displayName: 'Done Before Items',
		name: 'doneBefore',
		type: 'options',
		options: doneBeforeOptions,
		default: 'separate',
		description: 'Where the items of steps an earlier run already did go',
		displayOptions: { show: { operation: GATED_OPERATIONS, ...before15 } },
	},
	{
		displayName: 'Done Before Items',
		name: 'doneBefore',
		type: 'options',
		options: doneBeforeOptions,
		default: 'done',
		description:
			'Where the items of steps an earlier run already did go. On the Done output (the default), a re-run answers a webhook with the same fields as the first run.',
		displayOptions: { show: { operation: GATED_OPERATIONS, ...from15 } },
	},
];

/** Receipt: which answer fields become the step's remote id and kept receipt (one copy per operation). */
export const receiptFields = (operation: string): INodeProperties[] => [
	{
		displayName: 'Remote ID Path',
		name: 'remoteIdPath',
		type: 'string',
		default: 'id',
		description:
			'Dot path to the ID of what the side effect created, in its answer. The ledger stores it as proof; a later run gets it on Done Before. When the answer has none, the operation key stands for it.',
		displayOptions: show(operation),
	},
	{
		displayName: 'Receipt Fields',
		name: 'receiptFields',
		type: 'string',
		default: '',
		description:
			'Comma-separated dot paths of the answer to keep as the receipt (the Remote ID field always is). A later run outputs them on Done Before. Empty: from node version 1.5 the whole answer up to 48 KB, so Done Before has the same fields as Done. Secrets in them are redacted like every receipt.',
		displayOptions: show(operation),
	},
];

/** The gate's own options, as Begin Step's (the same names, read by prepare). */
export function gateOptionsField(operation: string, extra: INodeProperties[]): INodeProperties {
	return {
		displayName: 'Gate Options',
		name: 'gateOptions',
		type: 'collection',
		placeholder: 'Add Option',
		default: {},
		displayOptions: show(operation),
		options: ([
			...extra,
			{
				displayName: 'Operation Key',
				name: 'operationKey',
				type: 'string',
				default: '',
				description: 'Explicit idempotency key. Empty: the ledger uses {tenant}:{job_id}:v{task_version}:{action}.',
			},
			{
				displayName: 'Reconcile Automatically',
				name: 'autoReconcile',
				type: 'boolean',
				default: true,
				description:
					'Whether to ask the ledger to reconcile a step whose earlier attempt has no known outcome (when no Look Up is set up), before routing it to Needs Attention',
			},
			{
				displayName: 'Requires Approval',
				name: 'requiresApproval',
				type: 'boolean',
				default: false,
				description: 'Whether an approver must have approved this exact request first',
			},
			{
				displayName: 'Target',
				name: 'target',
				type: 'string',
				default: '',
				placeholder: 'billing:prod',
				description: 'The remote system the side effect writes to (used by the ledger\'s reconciler and approvals)',
			},
		] as INodeProperties[]).sort((a, b) => a.displayName.localeCompare(b.displayName)),
	};
}
