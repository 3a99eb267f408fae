import type { INodeProperties } from 'n8n-workflow';
import { show } from '../../sharedFields';

export const reconcileFields: INodeProperties[] = [
	{
		displayName: 'Operation Key',
		name: 'operationKey',
		type: 'string',
		required: true,
		default: '',
		placeholder: 'acme:article-42:v1:create_draft',
		description: 'The operation to reconcile',
		displayOptions: show('reconcile'),
	},
];
