import type { INodeProperties } from 'n8n-workflow';
import { show } from '../../sharedFields';

/** Record Outcome's own fields; its Operation Key and Fencing Token are shared with Report Lookup. */
export const recordOutcomeFields: INodeProperties[] = [
	{
		displayName: 'Outcome',
		name: 'outcome',
		type: 'options',
		options: [
			{
				name: 'Auto (From Incoming Item)',
				value: 'auto',
				description:
					'Confirm a successful item; classify an error item (HTTP status, timeout, connection reset) into failed or unknown',
			},
			{ name: 'Confirm', value: 'confirm', description: 'The side effect happened' },
			{ name: 'Fail', value: 'fail', description: 'The side effect provably did not happen' },
			{
				name: 'Unknown',
				value: 'unknown',
				description: 'The request was sent but its result cannot be proven',
			},
		],
		default: 'auto',
		displayOptions: show('recordOutcome'),
	},
	{
		displayName: 'Remote ID',
		name: 'remoteId',
		type: 'string',
		default: '={{ $json.id }}',
		description: 'ID of the object the side effect created, from the previous node',
		displayOptions: { show: { operation: ['recordOutcome'], outcome: ['auto', 'confirm'] } },
	},
	{
		displayName: 'Receipt',
		name: 'receipt',
		type: 'json',
		default: '={{ $json }}',
		description: 'What to store as proof; Already Done returns it on later runs',
		displayOptions: { show: { operation: ['recordOutcome'], outcome: ['auto', 'confirm'] } },
	},
	{
		displayName: 'Retryable',
		name: 'retryable',
		type: 'boolean',
		default: true,
		description: 'Whether a later run may try the step again',
		displayOptions: { show: { operation: ['recordOutcome'], outcome: ['fail'] } },
	},
	{
		displayName: 'Error Message',
		name: 'errorMessage',
		type: 'string',
		default: '',
		description: 'Why the step failed or is unknown (stored in the ledger)',
		displayOptions: { show: { operation: ['recordOutcome'], outcome: ['fail', 'unknown'] } },
	},
];
