import type { INodeProperties } from 'n8n-workflow';
import { show } from '../../sharedFields';

export const startJobFields: INodeProperties[] = [
	{
		displayName: 'Job ID',
		name: 'jobId',
		type: 'string',
		required: true,
		default: '',
		placeholder: 'order-1042',
		description: 'Stable ID of the business task (for example one order); the same on every retry',
		displayOptions: show('startJob'),
	},
	{
		displayName: 'Task Version',
		name: 'taskVersion',
		type: 'number',
		default: 1,
		typeOptions: { minValue: 1, numberPrecision: 0 },
		description:
			'Version of the goal. Higher than the job\'s: starts that version (its steps run again; approvals of the old version do not carry over). Lower: refused (node version 1.2) or noted in the output.',
		displayOptions: show('startJob'),
	},
	{
		displayName: 'Pipeline',
		name: 'pipeline',
		type: 'options',
		options: [
			{ name: 'Generic', value: 'generic' },
			{ name: 'Article', value: 'article' },
		],
		default: 'generic',
		description: 'Phase order used to check checkpoints; used only when the job is created',
		displayOptions: show('startJob'),
	},
	{
		displayName: 'Lease Owner',
		name: 'owner',
		type: 'string',
		default: '={{ "n8n-exec-" + $execution.id }}',
		description: 'Who holds the lease. Defaults to this n8n execution.',
		displayOptions: show('startJob'),
	},
	{
		displayName: 'Options',
		name: 'startOptions',
		type: 'collection',
		placeholder: 'Add Option',
		default: {},
		displayOptions: show('startJob'),
		options: [
			{
				displayName: 'Budgets (JSON)',
				name: 'budgets',
				type: 'json',
				default: '{}',
				description:
					'For example {"max_attempts": 3, "deadline_s": 3600}; used only when the job is created',
			},
			{
				displayName: 'Lease TTL (Seconds)',
				name: 'ttlS',
				type: 'number',
				default: 300,
				typeOptions: { minValue: 1 },
				description: 'How long the lease lives without renewal',
			},
			{
				displayName: 'Session ID',
				name: 'sessionId',
				type: 'string',
				default: '',
				description: 'Optional OpenAI Agents API session bound to this job',
			},
			{
				displayName: 'Take Over',
				name: 'takeover',
				type: 'boolean',
				default: true,
				description:
					'Whether to take the lease from another live owner, such as the execution before this one (finished, failed or crashed). The old owner gets a stale fencing token and can no longer write. Off: fail with lease_held while the lease is live. Node version 1.2 takes over when this option is not added.',
			},
			{
				displayName: 'Wait for Live Holder (Seconds)',
				name: 'waitForHolderS',
				type: 'number',
				default: 30,
				typeOptions: { minValue: 0 },
				description:
					'When another execution of this job is still working (its heartbeats are recent: the same trigger fired twice), wait up to this long for it to finish its step, then go on (its steps answer Done Before). Past it the item leaves by Running Elsewhere and nothing is written (node version 1.4: the node fails with running_elsewhere). A holder that died is taken over within 10 s of its last heartbeat.',
			},
		],
	},
];
