import type { INodeProperties } from 'n8n-workflow';
import { show } from '../../sharedFields';

export const reconcileFields: INodeProperties[] = [
	{
		displayName: 'Operation Key',
		name: 'operationKey',
		type: 'string',
		required: true,
		default: '',
		placeholder: 'acme:order-1042:v1:send_invoice',
		description: 'The operation to reconcile',
		displayOptions: show('reconcile'),
	},
];
