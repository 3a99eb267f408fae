import type { IDataObject, INodeProperties } from 'n8n-workflow';
import { before15, from15 } from './editorDefaults';

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

/** Shows a field for these operations only. */
export const show = (...operation: string[]) => ({ show: { operation } });

const LEASE_OPERATIONS = ['beginStep', 'gatedRequest', 'gatedSubworkflow', 'saveCheckpoint'];
const leaseShow = (range: IDataObject) => ({ show: { operation: LEASE_OPERATIONS, ...range } });

/**
 * Job ID + fencing token: one field each for Begin Step, the gated operations and Save
 * Checkpoint. Before 1.5 their defaults read the node named "Start Job"; from 1.5 they are empty
 * and the node finds its job (jobOfItem.ts), whatever the Start Job node is named.
 */
export const leaseFields: INodeProperties[] = [
	{
		displayName: 'Job ID',
		name: 'jobId',
		type: 'string',
		required: true,
		default: DEFAULT_JOB_ID,
		description: "The job's ID. Defaults to the output of the node named Start Job.",
		displayOptions: leaseShow(before15),
	},
	{
		displayName: 'Fencing Token',
		name: 'fencingToken',
		type: 'number',
		required: true,
		default: DEFAULT_FENCING_TOKEN,
		description: 'The lease token from Start Job. Defaults to the output of the node named Start Job.',
		displayOptions: leaseShow(before15),
	},
	{
		displayName: 'Job ID',
		name: 'jobId',
		type: 'string',
		default: '',
		placeholder: 'From the Start Job before this node',
		description: "The job's ID. Empty: the job of the Start Job before this node, whatever it is named.",
		displayOptions: leaseShow(from15),
	},
	{
		displayName: 'Fencing Token',
		name: 'fencingToken',
		type: 'number',
		default: 0,
		typeOptions: { minValue: 0, numberPrecision: 0 },
		description: 'The lease token. 0: the token of the Start Job before this node, whatever it is named (tokens start at 1).',
		displayOptions: leaseShow(from15),
	},
];

/** The step's operation key, one field for Record Outcome and Report Lookup. */
export const stepOperationKeyField: INodeProperties = {
	displayName: 'Operation Key',
	name: 'operationKey',
	type: 'string',
	required: true,
	default: DEFAULT_OPERATION_KEY,
	description: 'The step to record. Defaults to the output of the node named Begin Step.',
	displayOptions: show('recordOutcome', 'reportLookup'),
};

/** The step's fencing token, one field for Record Outcome and Report Lookup. */
export const stepFencingTokenField: INodeProperties = {
	displayName: 'Fencing Token',
	name: 'fencingToken',
	type: 'number',
	required: true,
	default: DEFAULT_STEP_FENCING_TOKEN,
	description: 'The lease token the step was begun with. Defaults to the output of the node named Begin Step.',
	displayOptions: show('recordOutcome', 'reportLookup'),
};
