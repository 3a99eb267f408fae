import type { INodeProperties } from 'n8n-workflow';

/*
 * Defaults read the Start Job / Begin Step output through paired items (`.item`), so they keep
 * working with several items per execution and through side-effect nodes that keep pairing
 * (HTTP Request does, also on its error output). n8n rewrites `$('Start Job')` when the node is
 * renamed in the editor; if you import a workflow with other names, set the fields explicitly.
 */
export const DEFAULT_JOB_ID = "={{ $('Start Job').item.json.job_id }}";
export const DEFAULT_FENCING_TOKEN = "={{ $('Start Job').item.json.fencing_token }}";
export const DEFAULT_OPERATION_KEY = "={{ $('Begin Step').item.json.durable.operation_key }}";
export const DEFAULT_STEP_FENCING_TOKEN = "={{ $('Begin Step').item.json.durable.fencing_token }}";
export const DEFAULT_ITEM_FENCING_TOKEN = '={{ $json.durable.fencing_token }}';
export const DEFAULT_STEP_ATTEMPT = "={{ $('Begin Step').item.json.durable.attempt }}";

const show = (...operation: string[]) => ({ show: { operation } });

export const properties: INodeProperties[] = [
	{
		displayName: 'Operation',
		name: 'operation',
		type: 'options',
		noDataExpression: true,
		options: [
			{
				name: 'Begin Step',
				value: 'beginStep',
				description: 'Gate a side effect: proceed, reuse the stored receipt, or stop for attention',
				action: 'Begin a step',
			},
			{
				name: 'Reconcile',
				value: 'reconcile',
				description: 'Ask the ledger to reconcile one operation with the remote system now',
				action: 'Reconcile an operation',
			},
			{
				name: 'Record Outcome',
				value: 'recordOutcome',
				description: 'Record what the side effect did: confirmed, failed or unknown',
				action: 'Record a step outcome',
			},
			{
				name: 'Report Lookup',
				value: 'reportLookup',
				description:
					"Tell the ledger what your own lookup found for a step on Begin Step's Look Up output: found, absent or undecidable",
				action: 'Report a lookup result',
			},
			{
				name: 'Save Checkpoint',
				value: 'saveCheckpoint',
				description: 'Save the phase the job reached, with evidence',
				action: 'Save a checkpoint',
			},
			{
				name: 'Start Job',
				value: 'startJob',
				description: 'Create or get the job and take its lease (fencing token)',
				action: 'Start a job',
			},
			{
				name: 'Wait for Approval',
				value: 'waitForApproval',
				description:
					'Register this execution with the ledger so that the Wait node after it is resumed when an approver decides',
				action: 'Wait for an approval',
			},
		],
		default: 'beginStep',
	},

	// ---- Start Job
	{
		displayName: 'Job ID',
		name: 'jobId',
		type: 'string',
		required: true,
		default: '',
		placeholder: 'article-42',
		description: 'Stable ID of the business task (for example one article); the same on every retry',
		displayOptions: show('startJob'),
	},
	{
		displayName: 'Task Version',
		name: 'taskVersion',
		type: 'number',
		default: 1,
		typeOptions: { minValue: 1, numberPrecision: 0 },
		description: 'Version of the goal; used only when the job is created',
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
				displayName: 'Lease TTL (Seconds)',
				name: 'ttlS',
				type: 'number',
				default: 300,
				typeOptions: { minValue: 1 },
				description: 'How long the lease lives without renewal',
			},
			{
				displayName: 'Take Over',
				name: 'takeover',
				type: 'boolean',
				default: false,
				description:
					'Whether to take the lease from another live owner (for example a crashed execution). The old owner gets a stale fencing token and can no longer write.',
			},
			{
				displayName: 'Budgets (JSON)',
				name: 'budgets',
				type: 'json',
				default: '{}',
				description:
					'For example {"max_attempts": 3, "deadline_s": 3600}; used only when the job is created',
			},
			{
				displayName: 'Session ID',
				name: 'sessionId',
				type: 'string',
				default: '',
				description: 'Optional OpenAI Agents API session bound to this job',
			},
		],
	},

	// ---- Job ID + fencing token for Begin Step and Save Checkpoint
	{
		displayName: 'Job ID',
		name: 'jobId',
		type: 'string',
		required: true,
		default: DEFAULT_JOB_ID,
		description: "The job's ID. Defaults to the output of the node named Start Job.",
		displayOptions: show('beginStep', 'saveCheckpoint'),
	},
	{
		displayName: 'Fencing Token',
		name: 'fencingToken',
		type: 'number',
		required: true,
		default: DEFAULT_FENCING_TOKEN,
		description: 'The lease token from Start Job. Defaults to the output of the node named Start Job.',
		displayOptions: show('beginStep', 'saveCheckpoint'),
	},

	// ---- Begin Step
	{
		displayName: 'Action',
		name: 'action',
		type: 'string',
		required: true,
		default: '',
		placeholder: 'create_draft',
		description: 'Name of the side effect, unique within the job (for example create_draft, upload_media:hero)',
		displayOptions: show('beginStep'),
	},
	{
		displayName: 'Payload',
		name: 'payload',
		type: 'json',
		default: '={{ $json }}',
		description:
			'What the side effect will send. The ledger stores its digest; the same step with a different payload goes to Needs Attention (digest_mismatch).',
		displayOptions: show('beginStep'),
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
				placeholder: 'wordpress:prod',
				description: 'The remote system the side effect writes to (used by the reconciler)',
			},
		],
	},

	// ---- Record Outcome / Reconcile: operation key
	{
		displayName: 'Operation Key',
		name: 'operationKey',
		type: 'string',
		required: true,
		default: DEFAULT_OPERATION_KEY,
		description: 'The step to record. Defaults to the output of the node named Begin Step.',
		displayOptions: show('recordOutcome', 'reportLookup'),
	},
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
	{
		displayName: 'Fencing Token',
		name: 'fencingToken',
		type: 'number',
		required: true,
		default: DEFAULT_STEP_FENCING_TOKEN,
		description: 'The lease token the step was begun with. Defaults to the output of the node named Begin Step.',
		displayOptions: show('recordOutcome', 'reportLookup'),
	},

	// ---- Report Lookup
	{
		displayName:
			"Put this after the nodes that searched the remote for the operation key of an item from Begin Step's Look Up output. Found: Already Done. Absent (only if your lookup proves nothing was written): the step is dispatched again and the item goes to Proceed. Undecidable: Needs Attention (review queue).",
		name: 'lookupNotice',
		type: 'notice',
		default: '',
		displayOptions: show('reportLookup'),
	},
	{
		displayName: 'Attempt',
		name: 'attempt',
		type: 'number',
		required: true,
		default: DEFAULT_STEP_ATTEMPT,
		description:
			'The attempt that was looked up (from the Look Up item). The ledger ignores a verdict for any other attempt.',
		displayOptions: show('reportLookup'),
	},
	{
		displayName: 'Result',
		name: 'lookupResult',
		type: 'options',
		options: [
			{
				name: 'Absent',
				value: 'absent',
				description: 'The lookup proves nothing was written, and a late write of that attempt can no longer land',
			},
			{ name: 'Found', value: 'found', description: 'The object exists with this operation key' },
			{ name: 'Undecidable', value: 'undecidable', description: 'The lookup cannot tell; an editor decides' },
		],
		default: 'found',
		description:
			'What the lookup found. Usually an expression on the lookup output, for example found when it returned an ID and absent when it returned nothing (see docs/builders.md).',
		displayOptions: show('reportLookup'),
	},
	{
		displayName: 'Remote ID',
		name: 'remoteId',
		type: 'string',
		default: '={{ $json.id }}',
		description: 'ID of the object the lookup found',
		displayOptions: { show: { operation: ['reportLookup'], lookupResult: ['found'] } },
	},
	{
		displayName: 'Receipt',
		name: 'receipt',
		type: 'json',
		default: '={{ $json }}',
		description: 'What to store as proof; Already Done returns it now and on later runs',
		displayOptions: { show: { operation: ['reportLookup'], lookupResult: ['found'] } },
	},
	{
		displayName: 'Evidence',
		name: 'evidence',
		type: 'json',
		default: '{}',
		description: 'What the lookup saw (query, match count...), stored with the verdict for editors',
		displayOptions: show('reportLookup'),
	},
	{
		displayName: 'Outcome',
		name: 'outcome',
		type: 'options',
		options: [
			{
				name: 'Auto (From Incoming Item)',
				value: 'auto',
				description:
					'Confirm a successful item; classify an error item (HTTP status, timeout, connection reset) into failed or unknown',
			},
			{ name: 'Confirm', value: 'confirm', description: 'The side effect happened' },
			{ name: 'Fail', value: 'fail', description: 'The side effect provably did not happen' },
			{
				name: 'Unknown',
				value: 'unknown',
				description: 'The request was sent but its result cannot be proven',
			},
		],
		default: 'auto',
		displayOptions: show('recordOutcome'),
	},
	{
		displayName: 'Remote ID',
		name: 'remoteId',
		type: 'string',
		default: '={{ $json.id }}',
		description: 'ID of the object the side effect created, from the previous node',
		displayOptions: { show: { operation: ['recordOutcome'], outcome: ['auto', 'confirm'] } },
	},
	{
		displayName: 'Receipt',
		name: 'receipt',
		type: 'json',
		default: '={{ $json }}',
		description: 'What to store as proof; Already Done returns it on later runs',
		displayOptions: { show: { operation: ['recordOutcome'], outcome: ['auto', 'confirm'] } },
	},
	{
		displayName: 'Retryable',
		name: 'retryable',
		type: 'boolean',
		default: true,
		description: 'Whether a later run may try the step again',
		displayOptions: { show: { operation: ['recordOutcome'], outcome: ['fail'] } },
	},
	{
		displayName: 'Error Message',
		name: 'errorMessage',
		type: 'string',
		default: '',
		description: 'Why the step failed or is unknown (stored in the ledger)',
		displayOptions: { show: { operation: ['recordOutcome'], outcome: ['fail', 'unknown'] } },
	},

	// ---- Wait for Approval
	{
		displayName:
			'Put a Wait node after this one (Resume: On Webhook Call, HTTP Method: POST) and connect it back to the Begin Step that answered approval_required. When an approver approves or denies, the ledger calls this execution\'s resume URL once; Begin Step then publishes, or stops with approval_denied.',
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
		description: 'The step waiting for approval. Defaults to the item from the Needs Attention output of Begin Step.',
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

	// ---- Save Checkpoint
	{
		displayName: 'Phase',
		name: 'phase',
		type: 'string',
		required: true,
		default: '',
		placeholder: 'DRAFT_CONFIRMED',
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
				placeholder: 'set_seo, request_approval',
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
