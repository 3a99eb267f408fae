import type {
	IAuthenticateGeneric,
	IAuthenticateRuleResponseCode,
	IAuthenticateRuleResponseSuccessBody,
	Icon,
	ICredentialTestRequest,
	ICredentialType,
	INodeProperties,
} from 'n8n-workflow';

/** Where `durable-ledger serve` listens by default (DURABLE_PORT / --port change it). */
export const DEFAULT_LEDGER_URL = 'http://127.0.0.1:8787';

const RUNNER_TOKEN_HINT =
	'The Durable Step node needs a runner token: durable-ledger token create --tenant <tenant> --role runner';

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
			default: DEFAULT_LEDGER_URL,
			placeholder: 'https://ledger.example.com',
			description: 'Root URL of the Durable Steps ledger service, without /v1 (durable-ledger serve listens on port 8787)',
			required: true,
		},
		{
			displayName: 'Token',
			name: 'token',
			type: 'string',
			typeOptions: { password: true },
			default: '',
			description:
				'Bearer token of role runner (or admin), printed once by: durable-ledger token create --tenant <tenant> --role runner. Approver and editor tokens are for the console and cannot run workflows.',
			required: true,
		},
		{
			displayName: 'Tenant',
			name: 'tenant',
			type: 'string',
			default: '',
			placeholder: 'acme',
			description: 'Optional: the tenant this token must belong to. The credential test fails for a token of another tenant.',
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

	// GET /v1/whoami answers the token's tenant and role (401 for a wrong token): the test proves
	// the URL, the token, that its role may run workflows and, with Tenant set, its tenant.
	test: ICredentialTestRequest = {
		request: {
			baseURL: '={{$credentials.baseUrl.replace(/\\/+$/, "")}}',
			url: '/v1/whoami',
			method: 'GET',
			qs: { tenant: '={{$credentials.tenant}}' },
		},
		// n8n's credential tester checks every rule by its own type (responseCode on an HTTP error,
		// responseSuccessBody on a 2xx body); the declared type only allows one kind per array.
		rules: [
			{
				type: 'responseCode',
				properties: {
					value: 401,
					message: `The ledger refused this token (401: unknown or revoked). ${RUNNER_TOKEN_HINT}`,
				},
			},
			{
				type: 'responseCode',
				properties: {
					value: 404,
					message:
						'No Durable Steps ledger answered GET /v1/whoami at this Base URL (404). Check the Base URL (without /v1; durable-ledger serve listens on port 8787 by default) and that the ledger is of this release (older ledgers have no /v1/whoami: upgrade them).',
				},
			},
			{
				type: 'responseSuccessBody',
				properties: {
					key: 'role',
					value: undefined,
					message: 'The server answered but is not a Durable Steps ledger (no role in GET /v1/whoami). Check the Base URL.',
				},
			},
			{
				type: 'responseSuccessBody',
				properties: {
					key: 'role',
					value: 'approver',
					message: `This is an approver's token: it may approve and deny steps in the ledger console, but not run workflows. ${RUNNER_TOKEN_HINT}`,
				},
			},
			{
				type: 'responseSuccessBody',
				properties: {
					key: 'role',
					value: 'editor',
					message: `This is an editor's token: it may resolve the review queue in the ledger console, but not run workflows. ${RUNNER_TOKEN_HINT}`,
				},
			},
			{
				type: 'responseSuccessBody',
				properties: {
					key: 'tenant_matches',
					value: false,
					message: 'This token belongs to another tenant than the one set in Tenant. Use a token of that tenant, or clear Tenant.',
				},
			},
		] as Array<IAuthenticateRuleResponseCode | IAuthenticateRuleResponseSuccessBody> as IAuthenticateRuleResponseSuccessBody[],
	};
}
