import type { INodeProperties } from 'n8n-workflow';
import { DEFAULT_ITEM_FENCING_TOKEN, show } from '../../sharedFields';

export const waitForApprovalFields: INodeProperties[] = [
	{
		displayName:
			'Put a Wait node downstream of this one (Resume: On Webhook Call, HTTP Method: POST) and connect it back to the Begin Step or Gated HTTP Request that answered approval_required. Between the two, send the approval request with any node (Send Email, Slack, Telegram, Microsoft Teams...): this node outputs it as approval.link, approval.subject, approval.text, approval.html and approval.slack_blocks on its item. When the approvers have decided, the ledger calls this execution\'s resume URL once; the step then asks again: it proceeds, or answers approval_denied and this node ends the execution with the reason.',
		name: 'waitNotice',
		type: 'notice',
		default: '',
		displayOptions: show('waitForApproval'),
	},
	{
		displayName: 'Operation Key',
		name: 'operationKey',
		type: 'string',
		required: true,
		default: '={{ $json.durable.operation_key }}',
		description: 'The step waiting for approval. Defaults to the item from the Attention output of Begin Step or Gated HTTP Request.',
		displayOptions: show('waitForApproval'),
	},
	{
		displayName: 'Fencing Token',
		name: 'fencingToken',
		type: 'number',
		required: true,
		default: DEFAULT_ITEM_FENCING_TOKEN,
		description: 'The lease token the step was begun with. Defaults to the item from Begin Step.',
		displayOptions: show('waitForApproval'),
	},
	{
		displayName: 'Resume URL',
		name: 'resumeUrl',
		type: 'string',
		required: true,
		default: '={{ $execution.resumeUrl }}',
		description:
			'The URL that resumes this execution from its Wait node (it carries a secret token; the ledger never shows it whole)',
		displayOptions: show('waitForApproval'),
	},
	{
		displayName: 'Options',
		name: 'waitOptions',
		type: 'collection',
		placeholder: 'Add Option',
		default: {},
		displayOptions: show('waitForApproval'),
		options: [
			{
				displayName: 'Link Expires After (Hours)',
				name: 'linkExpiresAfterHours',
				type: 'number',
				default: 72,
				typeOptions: { minValue: 1, maxValue: 720 },
				description:
					'How long the decision links in the approval request work. Not set: 72 hours. After that the links open nothing; the console still lists the approval.',
			},
		],
	},
];
