import type { INodeProperties } from 'n8n-workflow';
import { DEFAULT_STEP_ATTEMPT, show } from '../../sharedFields';

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
	{
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
			'What the lookup found. Usually an expression on the lookup output, for example found when it returned an ID and absent when it returned nothing (see docs/builders.md).',
		displayOptions: show('reportLookup'),
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
