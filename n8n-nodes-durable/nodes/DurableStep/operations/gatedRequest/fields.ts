import type { INodeProperties } from 'n8n-workflow';
import { show } from '../../sharedFields';
import { gateOptionsField, receiptFields } from '../gated/fields';

const only = (extra: Record<string, unknown[]> = {}) => ({ show: { operation: ['gatedRequest'], ...extra } });

const nameValues = (displayName: string, name: string, condition: Record<string, unknown[]>): INodeProperties => ({
	displayName,
	name,
	type: 'fixedCollection',
	typeOptions: { multipleValues: true },
	placeholder: 'Add Parameter',
	default: { parameters: [{ name: '', value: '' }] },
	displayOptions: only(condition),
	options: [
		{
			name: 'parameters',
			displayName: 'Parameter',
			values: [
				{ displayName: 'Name', name: 'name', type: 'string', default: '' },
				{ displayName: 'Value', name: 'value', type: 'string', default: '' },
			],
		},
	],
});

/** The request itself, as n8n's HTTP Request node names its fields. */
const requestFields: INodeProperties[] = [
	{
		displayName: 'Method',
		name: 'method',
		type: 'options',
		options: [
			{ name: 'DELETE', value: 'DELETE' },
			{ name: 'GET', value: 'GET' },
			{ name: 'PATCH', value: 'PATCH' },
			{ name: 'POST', value: 'POST' },
			{ name: 'PUT', value: 'PUT' },
		],
		default: 'POST',
		description: 'The HTTP method of the side effect',
		displayOptions: show('gatedRequest'),
	},
	{
		displayName: 'URL',
		name: 'url',
		type: 'string',
		required: true,
		default: '',
		placeholder: 'https://api.example.com/orders',
		description: 'The URL to send the request to. It is part of the request digest.',
		displayOptions: show('gatedRequest'),
	},
	{
		displayName: 'Authentication',
		name: 'authentication',
		type: 'options',
		options: [
			{ name: 'None', value: 'none' },
			{
				name: 'Durable HTTP Auth API',
				value: 'durableHttpAuthApi',
				description: "This package's credential: a header, a bearer token or basic auth",
			},
			{
				name: 'Durable Ledger API',
				value: 'durableLedgerApi',
				description: "The ledger credential's token (for the publishing proxy)",
			},
		],
		default: 'none',
		description: 'How the request authenticates with the remote',
		displayOptions: show('gatedRequest'),
	},
	{
		displayName: 'Send Query Parameters',
		name: 'sendQuery',
		type: 'boolean',
		default: false,
		displayOptions: show('gatedRequest'),
	},
	nameValues('Query Parameters', 'queryParameters', { sendQuery: [true] }),
	{
		displayName: 'Send Headers',
		name: 'sendHeaders',
		type: 'boolean',
		default: false,
		displayOptions: show('gatedRequest'),
	},
	nameValues('Header Parameters', 'headerParameters', { sendHeaders: [true] }),
	{
		displayName: 'Body',
		name: 'bodyType',
		type: 'options',
		options: [
			{ name: 'JSON', value: 'json' },
			{ name: 'Form (URL-Encoded)', value: 'form' },
			{ name: 'None', value: 'none' },
		],
		default: 'json',
		description: 'What the request sends. The body is part of the request digest: keep it stable (no timestamps).',
		displayOptions: show('gatedRequest'),
	},
	{
		displayName: 'JSON Body',
		name: 'jsonBody',
		type: 'json',
		default: '{}',
		description: 'What to send, as JSON text or an expression that returns an object (only business fields: no timestamps)',
		displayOptions: only({ bodyType: ['json'] }),
	},
	nameValues('Form Body', 'formBody', { bodyType: ['form'] }),
];

const lookUpOnly = only({ remoteDedupes: [false], lookUp: [true] });

/** How an unknown outcome is settled: by the remote's own dedupe, or a lookup that must prove it. */
const lookUpFields: INodeProperties[] = [
	{
		displayName: 'Remote Dedupes by Key',
		name: 'remoteDedupes',
		type: 'boolean',
		default: false,
		description:
			"Whether the remote keeps the first answer under the Idempotency Header's key and answers it again to a repeat (the IETF Idempotency-Key draft; Stripe, Adyen: see docs/builders.md for how to check an API). On: an attempt whose outcome is unknown (timeout, crash, 5xx) is settled by sending the same request with the same key and reading the answer; no lookup and no review. Off for any API not known to do so.",
		displayOptions: show('gatedRequest'),
	},
	{
		displayName: 'Look Up Unknown Outcomes',
		name: 'lookUp',
		type: 'boolean',
		default: false,
		description:
			'Whether to ask the remote when an earlier attempt has no known outcome (timeout, crash): a GET whose answer must show the object carrying the step\'s key. Off: such steps go to Needs Attention and the review queue.',
		displayOptions: only({ remoteDedupes: [false] }),
	},
	{
		displayName: 'Look Up URL',
		name: 'lookUpUrl',
		type: 'string',
		default: '',
		required: true,
		placeholder: 'https://api.example.com/orders?idempotency_key={operation_key}',
		description:
			"GET URL that answers the object the request created. {operation_key} is replaced by the step's key (URL-encoded). Found: an object in the answer (the answer itself, a list, or a list in data / results / items) whose Look Up Match Field equals Look Up Match Value. Absent: a 404 or an empty list, when 404 or Empty Proves Absence is on. Anything else is undecidable (review, with the answer kept); another status or no answer: asked again on the next run.",
		displayOptions: lookUpOnly,
	},
	{
		displayName: 'Look Up Match Field',
		name: 'lookUpMatchField',
		type: 'string',
		default: '',
		required: true,
		placeholder: 'metadata.op_key',
		description:
			"Dot path, in each object of the lookup's answer, of the field that holds the step's key (the request must store it there: in the body, or as the remote records the Idempotency Header). An object counts as found only when it matches, so an API that ignores the filter and answers other objects never passes for this step's.",
		displayOptions: lookUpOnly,
	},
	{
		displayName: 'Look Up Match Value',
		name: 'lookUpMatchValue',
		type: 'string',
		default: '{operation_key}',
		description: "The value the Match Field must have: {operation_key} (the step's key), or a business field's value from an expression (an order number)",
		displayOptions: lookUpOnly,
	},
	{
		displayName: 'Look Up ID Path',
		name: 'lookUpRemoteIdPath',
		type: 'string',
		default: '',
		description: "Dot path to the ID in the matching object. Empty: the Remote ID Path.",
		displayOptions: lookUpOnly,
	},
	{
		displayName: 'Look Up List Path',
		name: 'lookUpListPath',
		type: 'string',
		default: '',
		placeholder: 'data',
		description: 'Dot path to the list in a wrapped answer. Empty: the answer itself, or its data, results or items list.',
		displayOptions: lookUpOnly,
	},
	{
		displayName: '404 or Empty Proves Absence',
		name: 'lookUpEmptyIsAbsent',
		type: 'boolean',
		default: false,
		description:
			'Whether a 404 or an empty list proves nothing was written: on only when the Look Up URL addresses the object by the key (404: no such object) or selects by it, and the API is known to honour that (a wrong route answers 404 too; an ignored filter answers other objects) and to list a write as soon as it is answered. Off: they are undecidable (review).',
		displayOptions: lookUpOnly,
	},
];

export const gatedRequestFields: INodeProperties[] = [
	...requestFields,
	...receiptFields('gatedRequest'),
	...lookUpFields,
	gateOptionsField('gatedRequest', [
		{
			displayName: 'Add Step Ticket to Body',
			name: 'ticketInBody',
			type: 'boolean',
			default: false,
			description:
				'Whether to add operation_key, job_id and fencing_token to the body as sent (for a remote that checks the ledger itself, such as the publishing proxy). They are not part of the digest.',
		},
		{
			displayName: 'Digest Payload',
			name: 'payload',
			type: 'json',
			default: '',
			description:
				'What the ledger digests (and an approver sees) instead of the request as sent (its method, URL and body). Only for a remote that checks the digest itself against its own definition and refuses a request that differs, such as the publishing proxy (docs/proxy.md): elsewhere the request could drift from what was digested.',
		},
		{
			displayName: 'Idempotency Header',
			name: 'idempotencyHeader',
			type: 'string',
			default: 'Idempotency-Key',
			description: 'Header that carries the operation key, so a remote that honours it dedupes too. Empty: no header.',
		},
		{
			displayName: 'Timeout (Ms)',
			name: 'timeout',
			type: 'number',
			default: 30000,
			description: 'How long to wait for the answer. A timeout is an unknown outcome: the next run looks up or reconciles, it never resends blindly.',
		},
	]),
];
