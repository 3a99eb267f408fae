import type {
	ICredentialDataDecryptedObject,
	ICredentialTestRequest,
	ICredentialType,
	IHttpRequestOptions,
	Icon,
	INodeProperties,
} from 'n8n-workflow';

/**
 * How a Gated HTTP Request authenticates with its remote: a header, a bearer token or basic auth.
 * The package ships its own because a community node may not use n8n's generic credentials.
 */
export class DurableHttpAuthApi implements ICredentialType {
	name = 'durableHttpAuthApi';

	displayName = 'Durable HTTP Auth API';

	icon: Icon = { light: 'file:../icons/durable.svg', dark: 'file:../icons/durable.dark.svg' };

	documentationUrl =
		'https://github.com/durable-steps/durable-steps/tree/main/n8n-nodes-durable#gated-http-request';

	properties: INodeProperties[] = [
		{
			displayName: 'Type',
			name: 'kind',
			type: 'options',
			options: [
				{ name: 'Basic Auth', value: 'basic' },
				{ name: 'Bearer Token', value: 'bearer' },
				{ name: 'Header', value: 'header' },
			],
			default: 'bearer',
		},
		{
			displayName: 'Header Name',
			name: 'headerName',
			type: 'string',
			default: 'X-API-Key',
			displayOptions: { show: { kind: ['header'] } },
		},
		{
			displayName: 'Token',
			name: 'token',
			type: 'string',
			typeOptions: { password: true },
			default: '',
			description: 'The bearer token, or the header\'s value',
			displayOptions: { show: { kind: ['bearer', 'header'] } },
		},
		{
			displayName: 'User',
			name: 'user',
			type: 'string',
			default: '',
			displayOptions: { show: { kind: ['basic'] } },
		},
		{
			displayName: 'Password',
			name: 'password',
			type: 'string',
			typeOptions: { password: true },
			default: '',
			displayOptions: { show: { kind: ['basic'] } },
		},
		{
			displayName: 'Test URL',
			name: 'testUrl',
			type: 'string',
			default: '',
			placeholder: 'https://api.example.com/me',
			description: 'A GET URL of the remote that answers 2xx only with valid credentials: the credential test calls it',
		},
	];

	async authenticate(credentials: ICredentialDataDecryptedObject, requestOptions: IHttpRequestOptions): Promise<IHttpRequestOptions> {
		const headers = { ...(requestOptions.headers ?? {}) };
		const kind = String(credentials.kind ?? 'bearer');
		if (kind === 'basic') {
			return { ...requestOptions, auth: { username: String(credentials.user ?? ''), password: String(credentials.password ?? '') } };
		}
		if (kind === 'header') headers[String(credentials.headerName ?? 'X-API-Key')] = String(credentials.token ?? '');
		else headers.Authorization = `Bearer ${String(credentials.token ?? '')}`;
		return { ...requestOptions, headers };
	}

	test: ICredentialTestRequest = {
		request: { url: '={{$credentials.testUrl}}', method: 'GET' },
	};
}
