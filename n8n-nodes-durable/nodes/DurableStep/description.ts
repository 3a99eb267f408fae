import type { INodeCredentialDescription, INodeProperties } from 'n8n-workflow';
import { needsAttentionField } from './attention';
import { beginStepFields } from './operations/beginStep/fields';
import { doneBeforeField, gatedActionField } from './operations/gated/fields';
import { gatedRequestFields } from './operations/gatedRequest/fields';
import { gatedSubworkflowFields } from './operations/gatedSubworkflow/fields';
import { reconcileFields } from './operations/reconcile/fields';
import { recordOutcomeFields } from './operations/recordOutcome/fields';
import { reportLookupFields } from './operations/reportLookup/fields';
import { saveCheckpointFields } from './operations/saveCheckpoint/fields';
import { startJobFields } from './operations/startJob/fields';
import { waitForApprovalFields } from './operations/waitForApproval/fields';
import { leaseFields, stepFencingTokenField, stepOperationKeyField } from './sharedFields';
import { CREDENTIAL_NAME, HTTP_AUTH_CREDENTIAL } from './transport';

export const credentials: INodeCredentialDescription[] = [
	{ name: CREDENTIAL_NAME, required: true },
	// Gated HTTP Request's remote, when it authenticates with this package's own credential. A
	// community node may not use n8n's generic credentials (Header Auth, OAuth2...): n8n's
	// community-node rules refuse credentials of another package.
	{
		name: HTTP_AUTH_CREDENTIAL,
		required: true,
		displayOptions: { show: { operation: ['gatedRequest'], authentication: [HTTP_AUTH_CREDENTIAL] } },
	},
];

/**
 * The operations in the order a workflow uses them (not alphabetical: Start Job comes first).
 * `action` is the name again, so the editor's action list, the docs and the subtitle agree.
 * An identifier, not a literal, so that the alphabetical-order lint rule does not apply.
 */
export const OPERATION_OPTIONS = [
	{
		name: 'Start Job',
		value: 'startJob',
		description: 'Create or get the job and take its lease (fencing token)',
		action: 'Start Job',
	},
	{
		name: 'Gated HTTP Request',
		value: 'gatedRequest',
		description:
			'Send an HTTP request exactly once: begin, send, record and route Done / Done Before in one node, with a built-in lookup for unknown outcomes',
		action: 'Gated HTTP Request',
	},
	{
		name: 'Gated Sub-Workflow',
		value: 'gatedSubworkflow',
		description:
			'Run a sub-workflow exactly once (any nodes: Postgres, Send Email, Slack...): begin, run, record and route Done / Done Before in one node, with a lookup sub-workflow for unknown outcomes',
		action: 'Gated Sub-Workflow',
	},
	{
		name: 'Begin Step',
		value: 'beginStep',
		description: 'Gate a side effect: proceed, reuse the stored receipt, or stop for attention',
		action: 'Begin Step',
	},
	{
		name: 'Record Outcome',
		value: 'recordOutcome',
		description: 'Record what the side effect did: confirmed, failed or unknown',
		action: 'Record Outcome',
	},
	{
		name: 'Save Checkpoint',
		value: 'saveCheckpoint',
		description: 'Save the phase the job reached, with evidence',
		action: 'Save Checkpoint',
	},
	{
		name: 'Wait for Approval',
		value: 'waitForApproval',
		description:
			'Register this execution with the ledger so that the Wait node after it is resumed when an approver decides',
		action: 'Wait for Approval',
	},
	{
		name: 'Report Lookup',
		value: 'reportLookup',
		description:
			"Tell the ledger what your own lookup found for a step on Begin Step's Look Up output: found, absent or undecidable",
		action: 'Report Lookup',
	},
	{
		name: 'Reconcile',
		value: 'reconcile',
		description: 'Ask the ledger to reconcile one operation with the remote system now',
		action: 'Reconcile',
	},
];

/** The operation selector; every value has a module in operations/index.ts. */
export const operationField: INodeProperties = {
	displayName: 'Operation',
	name: 'operation',
	type: 'options',
	noDataExpression: true,
	options: OPERATION_OPTIONS,
	// Unchanged: saved workflows omit a parameter equal to its default, so a new default would
	// turn every saved Begin Step into another operation.
	default: 'beginStep',
};

/** The node's subtitle: the operation's name, and Begin Step's action ("Begin Step: publish_post"). */
export const SUBTITLE = `={{ ({${OPERATION_OPTIONS.map((o) => `${o.value}: "${o.name}"`).join(', ')}})[$parameter["operation"]] + (["beginStep", "gatedRequest", "gatedSubworkflow"].includes($parameter["operation"]) && $parameter["action"] ? ": " + $parameter["action"] : "") }}`;

/**
 * Every field, in the order the editor shows them (and saved workflows were built with). A
 * field shared by two operations is one entry (sharedFields.ts), at the place it always had.
 */
export const properties: INodeProperties[] = [
	operationField,
	...startJobFields,
	...leaseFields, // Begin Step, Save Checkpoint
	...beginStepFields,
	gatedActionField,
	...gatedRequestFields,
	...gatedSubworkflowFields,
	stepOperationKeyField, // Record Outcome, Report Lookup
	...reconcileFields,
	stepFencingTokenField, // Record Outcome, Report Lookup
	...reportLookupFields,
	...recordOutcomeFields,
	...waitForApprovalFields,
	...saveCheckpointFields,
	doneBeforeField, // the one-node operations
	needsAttentionField, // Begin Step, Report Lookup, Record Outcome, the one-node operations (1.2)
];
