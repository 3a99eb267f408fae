import type { INodeCredentialDescription, INodeProperties } from 'n8n-workflow';
import { approvalPolicyField } from './approvalPolicy';
import { needsAttentionField } from './attention';
import { OPERATION_OPTIONS } from './operations';
import { beginStepFields } from './operations/beginStep/fields';
import { doneBeforeFields, gatedActionField } from './operations/gated/fields';
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
		displayOptions: {
			show: { operation: ['gatedRequest'], authentication: [HTTP_AUTH_CREDENTIAL] },
		},
	},
];

/** The operation selector (its options: operations/index.ts). */
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
	approvalPolicyField, // Begin Step, the one-node operations
	stepOperationKeyField, // Record Outcome, Report Lookup
	...reconcileFields,
	stepFencingTokenField, // Record Outcome, Report Lookup
	...reportLookupFields,
	...recordOutcomeFields,
	...waitForApprovalFields,
	...saveCheckpointFields,
	...doneBeforeFields, // the one-node operations (1.5: a new default)
	needsAttentionField, // Begin Step, Report Lookup, Record Outcome, the one-node operations (1.2)
];
