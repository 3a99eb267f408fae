import type { INodeProperties } from 'n8n-workflow';
import { DEFAULT_STEP_ATTEMPT, show } from '../../sharedFields';

/** Version 1.3: Report Lookup's Result has no default (before: Found). */
export const RESULT_VERSION = 1.3;

const resultField: INodeProperties = {
	displayName: 'Result',
	name: 'lookupResult',
	type: 'options',
	options: [
		{
			name: 'Absent',
			value: 'absent',
			description: 'The lookup proves nothing was written, and a late write of that attempt can no longer land',
		},
		{ name: 'Found', value: 'found', description: 'The object exists with this operation key' },
		{ name: 'Undecidable', value: 'undecidable', description: 'The lookup cannot tell; an editor decides' },
	],
	default: 'found',
	description:
		'What the lookup found. Usually an expression on the lookup output: found only when the object carries this step\'s key, absent only when the lookup proves nothing was written (see docs/builders.md).',
};

/** Report Lookup's own fields; its Operation Key and Fencing Token are shared with Record Outcome. */
export const reportLookupFields: INodeProperties[] = [
	{
		displayName:
			"Put this after the nodes that searched the remote for the operation key of an item from Begin Step's Look Up output. Found: Already Done. Absent (only if your lookup proves nothing was written): the step is dispatched again and the item goes to Proceed. Undecidable: Needs Attention (review queue).",
		name: 'lookupNotice',
		type: 'notice',
		default: '',
		displayOptions: show('reportLookup'),
	},
	{
		displayName: 'Attempt',
		name: 'attempt',
		type: 'number',
		required: true,
		default: DEFAULT_STEP_ATTEMPT,
		description:
			'The attempt that was looked up (from the Look Up item). The ledger ignores a verdict for any other attempt.',
		displayOptions: show('reportLookup'),
	},
	// Before 1.3 the Result defaulted to Found: a Report Lookup left at its defaults reported every
	// lookup as found, whatever it returned. From 1.3 it has no default; the node refuses an empty one.
	{
		...resultField,
		displayOptions: { show: { operation: ['reportLookup'], '@version': [{ _cnd: { lt: RESULT_VERSION } }] } },
	},
	{
		displayName: 'Result',
		name: 'lookupResult',
		type: 'string',
		required: true,
		default: '',
		placeholder: "={{ $json.op_key === $('Begin Step').item.json.durable.operation_key ? 'found' : 'undecidable' }}",
		description:
			'One of found, absent or undecidable, usually an expression on the lookup output. Found only when the object carries this step\'s key; absent only when the lookup proves nothing was written; anything else undecidable (see docs/builders.md).',
		displayOptions: { show: { operation: ['reportLookup'], '@version': [{ _cnd: { gte: RESULT_VERSION } }] } },
	},
	{
		displayName: 'Remote ID',
		name: 'remoteId',
		type: 'string',
		default: '={{ $json.id }}',
		description: 'ID of the object the lookup found',
		displayOptions: { show: { operation: ['reportLookup'], lookupResult: ['found'] } },
	},
	{
		displayName: 'Receipt',
		name: 'receipt',
		type: 'json',
		default: '={{ $json }}',
		description: 'What to store as proof; Already Done returns it now and on later runs',
		displayOptions: { show: { operation: ['reportLookup'], lookupResult: ['found'] } },
	},
	{
		displayName: 'Evidence',
		name: 'evidence',
		type: 'json',
		default: '{}',
		description: 'What the lookup saw (query, match count...), stored with the verdict for editors',
		displayOptions: show('reportLookup'),
	},
];
