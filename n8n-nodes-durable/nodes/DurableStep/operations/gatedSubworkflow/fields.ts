import type { INodeProperties } from 'n8n-workflow';
import { show } from '../../sharedFields';
import { gateOptionsField, receiptFields } from '../gated/fields';

const only = (extra: Record<string, unknown[]> = {}) => ({ show: { operation: ['gatedSubworkflow'], ...extra } });

/**
 * A workflow selector, as n8n's Execute Workflow node has it (From list / By ID); saved as a
 * resource locator `{__rl, mode, value, cachedResultName}`.
 */
const workflowSelector = (displayName: string, name: string, description: string, displayOptions: INodeProperties['displayOptions']): INodeProperties => ({
	displayName,
	name,
	type: 'workflowSelector',
	default: '',
	required: true,
	description,
	displayOptions,
});

export const gatedSubworkflowFields: INodeProperties[] = [
	workflowSelector(
		'Sub-Workflow',
		'workflowId',
		'The workflow that performs the side effect, starting with an Execute Workflow Trigger (Accept All Data). It gets the Input plus durable (job_id, action, operation_key, fencing_token, attempt) and runs once per dispatched attempt. Its last node\'s first item is the answer.',
		show('gatedSubworkflow'),
	),
	{
		displayName: 'Input',
		name: 'inputSource',
		type: 'options',
		options: [
			{ name: 'Input Item', value: 'item', description: "This node's input item" },
			{
				name: 'Custom',
				value: 'custom',
				description: "An object, for example the trigger's fields (Start Job's item holds only the job and its lease)",
			},
		],
		default: 'item',
		description: 'What the sub-workflow gets, with durable (the step\'s ticket) added. The input item\'s binary data is passed along either way.',
		displayOptions: show('gatedSubworkflow'),
	},
	{
		displayName: 'Input (JSON)',
		name: 'subworkflowInput',
		type: 'json',
		default: '{}',
		placeholder: "{{ $('When Called').item.json }}",
		description: 'The fields the sub-workflow gets, as JSON or an expression that returns an object',
		displayOptions: only({ inputSource: ['custom'] }),
	},
	{
		displayName: 'Payload',
		name: 'payloadSource',
		type: 'options',
		options: [
			{
				name: 'Input Without Durable Step Fields',
				value: 'item',
				description: 'What the sub-workflow gets, without what Start Job and Durable Step put there (fencing_token, lease, durable...)',
			},
			{
				name: 'Custom',
				value: 'custom',
				description: 'An expression or JSON with the business fields only',
			},
		],
		default: 'item',
		description:
			'What the ledger digests for this step: a re-run with a different payload is refused with digest_mismatch. It does not change what the sub-workflow gets.',
		displayOptions: show('gatedSubworkflow'),
	},
	{
		displayName: 'Payload (JSON)',
		name: 'payload',
		type: 'json',
		default: '{}',
		hint: 'Keep it stable: no timestamps, random IDs, fencing tokens or lease fields',
		description: 'The business fields the side effect is about, as JSON or an expression',
		displayOptions: only({ payloadSource: ['custom'] }),
	},
	...receiptFields('gatedSubworkflow'),
	{
		displayName: 'Look Up Unknown Outcomes',
		name: 'lookUp',
		type: 'boolean',
		default: false,
		description:
			'Whether to run a lookup sub-workflow when an earlier attempt has no known outcome (the sub-workflow failed, n8n crashed): it searches the remote for the step and answers found, absent or undecidable. Off: the ledger reconciles, else Needs Attention.',
		displayOptions: show('gatedSubworkflow'),
	},
	workflowSelector(
		'Lookup Sub-Workflow',
		'lookUpWorkflowId',
		'The workflow that finds what an earlier attempt did. It gets the same input (item plus durable) and answers with one item: {result: "found" | "absent" | "undecidable", remote_id, receipt}. Absent: the step is dispatched again here.',
		only({ lookUp: [true] }),
	),
	gateOptionsField('gatedSubworkflow', [
		{
			displayName: 'In-Flight Window (Ms)',
			name: 'inFlightMs',
			type: 'number',
			default: 0,
			description:
				'How long one run of the sub-workflow can take to write. While an attempt sent less than this ago is still unrecorded, a lookup that finds nothing proves nothing (another execution may still be running it): the next run looks again. 0: an absent answer is trusted at once.',
		},
	]),
];
