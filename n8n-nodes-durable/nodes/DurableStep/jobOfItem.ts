import type { IDataObject, IExecuteFunctions } from 'n8n-workflow';
import { NodeOperationError } from 'n8n-workflow';
import { EDITOR_DEFAULTS_FROM } from './editorDefaults';
import { fencingToken, optionalString, requiredString } from './params';

/** The job an item works under: its ID and the fencing token of this execution's lease. */
export interface ItemJob {
	jobId: string;
	token: number;
}

const isToken = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v) && v >= 0;

/**
 * The job written on the item itself: Start Job's item (`job_id`, `fencing_token` and its `lease`
 * with the same token), or an item that left another Durable Step node (`durable.job_id`,
 * `durable.fencing_token`: Done, Done Before, Proceed).
 */
export function jobOnItem(json: IDataObject): ItemJob | null {
	const durable = json.durable as IDataObject | undefined;
	if (durable && typeof durable === 'object' && typeof durable.job_id === 'string' && durable.job_id && isToken(durable.fencing_token)) {
		return { jobId: durable.job_id, token: durable.fencing_token };
	}
	const lease = json.lease as IDataObject | undefined;
	if (typeof json.job_id === 'string' && json.job_id && isToken(json.fencing_token) && lease?.fencing_token === json.fencing_token) {
		return { jobId: json.job_id, token: json.fencing_token };
	}
	return null;
}

/**
 * The job of the nearest Start Job before this node, read through paired items as n8n's own
 * `$('Start Job').item` does, whatever the node is named ("Durable Step" when it was added from
 * the node search).
 */
function jobUpstream(ctx: IExecuteFunctions, i: number): ItemJob | null {
	const self = ctx.getNode();
	let parents: Array<{ name: string; type: string; disabled?: boolean; parameters?: IDataObject }> = [];
	try {
		parents = (ctx.getParentNodes?.(self.name, { includeNodeParameters: true }) ?? []) as typeof parents;
	} catch {
		return null;
	}
	for (const parent of parents) {
		if (parent.type !== self.type || parent.disabled || parent.parameters?.operation !== 'startJob') continue;
		try {
			const json = ctx.evaluateExpression(`{{ $(${JSON.stringify(parent.name)}).item.json }}`, i) as IDataObject;
			const job = json && typeof json === 'object' ? jobOnItem(json) : null;
			if (job) return job;
		} catch {
			// No paired item back to this Start Job (a node between them that does not keep
			// pairing): the next one, else the error below.
		}
	}
	return null;
}

function noJob(ctx: IExecuteFunctions, i: number): NodeOperationError {
	const name = ctx.getNode().name;
	return new NodeOperationError(ctx.getNode(), `No job for this item: no Start Job before "${name}"`, {
		itemIndex: i,
		description:
			`"${name}" works under the lease of a job, which a Durable Step node with the operation Start Job takes. ` +
			'Add one before this node (after the trigger), or set Job ID and Fencing Token to expressions, for example ' +
			"{{ $('My Start Job').item.json.job_id }} and {{ $('My Start Job').item.json.fencing_token }}.",
	});
}

/**
 * Job ID and Fencing Token of item i. Before node version 1.5 both come from their fields (whose
 * defaults read the node named "Start Job"). From 1.5 an empty Job ID or a Fencing Token of 0 (the
 * defaults) is found: the
 * item's own fields, else the nearest Start Job upstream; a field set explicitly wins.
 */
export function itemJob(ctx: IExecuteFunctions, i: number): ItemJob {
	if (Number(ctx.getNode().typeVersion ?? 1) < EDITOR_DEFAULTS_FROM) {
		return { jobId: requiredString(ctx, 'jobId', i, 'Job ID'), token: fencingToken(ctx, i) };
	}
	const explicitJob = optionalString(ctx.getNodeParameter('jobId', i, ''));
	// Tokens start at 1: 0 (the field's default), an empty or a null value all mean "find it".
	const rawToken = ctx.getNodeParameter('fencingToken', i, 0);
	const explicitToken = optionalString(rawToken) !== undefined && Number(rawToken) !== 0;
	if (explicitJob && explicitToken) return { jobId: explicitJob, token: fencingToken(ctx, i) };
	const found = jobOnItem(ctx.getInputData()[i]?.json ?? {}) ?? jobUpstream(ctx, i);
	if (!found || (explicitJob && found.jobId !== explicitJob)) throw noJob(ctx, i);
	return explicitToken ? { jobId: found.jobId, token: fencingToken(ctx, i) } : found;
}
