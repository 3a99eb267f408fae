import type { INodeProperties } from 'n8n-workflow';
import { show } from '../../sharedFields';

/** Save Checkpoint's own fields; its Job ID and Fencing Token are the shared lease fields. */
export const saveCheckpointFields: INodeProperties[] = [
	{
		displayName: 'Phase',
		name: 'phase',
		type: 'string',
		required: true,
		default: '',
		placeholder: 'INVOICE_SENT',
		description: 'Phase the job reached (phases may not be skipped)',
		displayOptions: show('saveCheckpoint'),
	},
	{
		displayName: 'Artifacts',
		name: 'artifacts',
		type: 'fixedCollection',
		typeOptions: { multipleValues: true },
		default: {},
		placeholder: 'Add Artifact',
		description: 'Evidence for the phase: files or objects with their digest',
		displayOptions: show('saveCheckpoint'),
		options: [
			{
				displayName: 'Artifact',
				name: 'artifact',
				values: [
					{ displayName: 'Role', name: 'role', type: 'string', default: '', placeholder: 'body' },
					{ displayName: 'URI', name: 'uri', type: 'string', default: '' },
					{ displayName: 'SHA-256', name: 'sha256', type: 'string', default: '' },
				],
			},
		],
	},
	{
		displayName: 'Options',
		name: 'checkpointOptions',
		type: 'collection',
		placeholder: 'Add Option',
		default: {},
		displayOptions: show('saveCheckpoint'),
		options: [
			{
				displayName: 'Remote IDs (JSON)',
				name: 'remote',
				type: 'json',
				default: '{}',
				description: 'IDs of objects in remote systems, for example {"post_id": 17}',
			},
			{
				displayName: 'Next Allowed Actions',
				name: 'nextAllowedActions',
				type: 'string',
				default: '',
				placeholder: 'send_receipt, notify_customer',
				description: 'Comma-separated actions a resumed run may take next',
			},
			{
				displayName: 'Task Version',
				name: 'taskVersion',
				type: 'number',
				default: 0,
				description: "The job's task version (0: the job's current version)",
			},
		],
	},
];
