import type { INodeProperties } from 'n8n-workflow';
import { show } from '../../sharedFields';

/** Begin Step's own fields; its Job ID and Fencing Token are the shared lease fields. */
export const beginStepFields: INodeProperties[] = [
	{
		displayName: 'Action',
		name: 'action',
		type: 'string',
		required: true,
		default: '',
		placeholder: 'send_invoice',
		description: 'Name of the side effect, unique within the job (for example send_invoice, create_record:customer)',
		displayOptions: show('beginStep'),
	},
	{
		displayName: 'Payload',
		name: 'payload',
		type: 'json',
		default: '={{ $json }}',
		description:
			'What the side effect will send. The ledger stores its digest; the same step with a different payload goes to Needs Attention (digest_mismatch).',
		displayOptions: { show: { operation: ['beginStep'], '@version': [1, 1.1] } },
	},
	{
		displayName: 'Payload',
		name: 'payloadSource',
		type: 'options',
		options: [
			{
				name: 'Input Item Without Durable Step Fields',
				value: 'item',
				description:
					"The input item without what Start Job and Durable Step put there (fencing_token, lease, job, durable...): they change with every run",
			},
			{
				name: 'Custom',
				value: 'custom',
				description: 'An expression or JSON with the business fields only',
			},
		],
		default: 'item',
		description:
			'What the side effect will send. The ledger stores its digest: a re-run with a different payload is refused with digest_mismatch.',
		displayOptions: { show: { operation: ['beginStep'], '@version': [{ _cnd: { gte: 1.2 } }] } },
	},
	{
		displayName: 'Payload (JSON)',
		name: 'payload',
		type: 'json',
		default: '{}',
		hint: 'Keep it stable: no timestamps, random IDs, fencing tokens or lease fields',
		description: 'The business fields the side effect sends, as JSON or an expression (for example the order number and total of the input item)',
		displayOptions: {
			show: { operation: ['beginStep'], payloadSource: ['custom'], '@version': [{ _cnd: { gte: 1.2 } }] },
		},
	},
	{
		displayName: 'Options',
		name: 'beginOptions',
		type: 'collection',
		placeholder: 'Add Option',
		default: {},
		displayOptions: show('beginStep'),
		options: [
			{
				displayName: 'Operation Key',
				name: 'operationKey',
				type: 'string',
				default: '',
				description:
					'Explicit idempotency key. Empty: the ledger uses {tenant}:{job_id}:v{task_version}:{action}.',
			},
			{
				displayName: 'Reconcile Automatically',
				name: 'autoReconcile',
				type: 'boolean',
				default: true,
				description:
					'Whether to ask the ledger to reconcile a step whose earlier attempt has no known outcome, before routing it to Needs Attention',
			},
			{
				displayName: 'Requires Approval',
				name: 'requiresApproval',
				type: 'boolean',
				default: false,
				description: 'Whether an approver must have approved this exact payload first',
			},
			{
				displayName: 'Route Unknown Outcomes to Look Up',
				name: 'routeToLookUp',
				type: 'boolean',
				default: false,
				description:
					"Whether to add a Look Up output: a step whose earlier attempt has no known outcome, and that the ledger cannot reconcile itself, goes there so your nodes can search the remote for its operation key and answer with Report Lookup. Off: such steps go to Needs Attention (the review queue decides).",
			},
			{
				displayName: 'Target',
				name: 'target',
				type: 'string',
				default: '',
				placeholder: 'billing:prod',
				description: 'The remote system the side effect writes to (used by the reconciler)',
			},
		],
	},
];
