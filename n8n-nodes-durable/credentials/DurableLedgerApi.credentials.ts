import type {
	IAuthenticateGeneric,
	Icon,
	ICredentialTestRequest,
	ICredentialType,
	INodeProperties,
} from 'n8n-workflow';

export class DurableLedgerApi implements ICredentialType {
	name = 'durableLedgerApi';

	displayName = 'Durable Ledger API';

	icon: Icon = { light: 'file:../icons/durable.svg', dark: 'file:../icons/durable.dark.svg' };

	documentationUrl =
		'https://github.com/durable-steps/durable-steps/tree/main/n8n-nodes-durable#credentials';

	properties: INodeProperties[] = [
		{
			displayName: 'Base URL',
			name: 'baseUrl',
			type: 'string',
			default: 'http://127.0.0.1:8787',
			placeholder: 'https://ledger.example.com',
			description: 'Root URL of the Durable Steps ledger service, without /v1',
			required: true,
		},
		{
			displayName: 'Token',
			name: 'token',
			type: 'string',
			typeOptions: { password: true },
			default: '',
			description: 'Bearer token issued by the ledger (role runner, or admin)',
			required: true,
		},
	];

	authenticate: IAuthenticateGeneric = {
		type: 'generic',
		properties: {
			headers: {
				Authorization: '=Bearer {{$credentials.token}}',
			},
		},
	};

	// GET /health answers without a token too; with a token it echoes tenant and role, and a
	// wrong token is refused with 401, so the test proves both the URL and the token.
	test: ICredentialTestRequest = {
		request: {
			baseURL: '={{$credentials.baseUrl.replace(/\\/+$/, "")}}',
			url: '/health',
			method: 'GET',
		},
		rules: [
			{
				type: 'responseSuccessBody',
				properties: {
					key: 'role',
					value: undefined,
					message: 'The ledger answered but did not recognise the token (no role in /health)',
				},
			},
		],
	};
}
