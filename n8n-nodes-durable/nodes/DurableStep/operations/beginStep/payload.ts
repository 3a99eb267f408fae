import type { IDataObject, IExecuteFunctions } from 'n8n-workflow';
import { NodeOperationError } from 'n8n-workflow';
import { jsonParam } from '../../params';

/** Version 1.2: Payload "Input Item Without Durable Step Fields" (the default) or "Custom". */
export const PAYLOAD_VERSION = 1.2;

/**
 * What Start Job's item holds (operations/startJob/execute.ts): job and lease, no business data.
 * `waited_for_holder_s` (node 1.4) is there only for an execution that waited for another one of the
 * same job: in the payload it made that duplicate's digest differ (digest_mismatch instead of Done
 * Before).
 */
export const START_JOB_FIELDS = [
	'job_id',
	'fencing_token',
	'phase',
	'task_version',
	'status',
	'needs_reconcile',
	'lease',
	'job',
	'waited_for_holder_s',
];

/** Start Job's item, recognised by its lease: only then are its field names not the builder's. */
function isStartJobItem(json: IDataObject): boolean {
	const lease = json.lease as IDataObject | undefined;
	return 'fencing_token' in json && !!lease && typeof lease === 'object' && 'fencing_token' in lease;
}

/** The item without `durable` (Begin Step, Record Outcome) and, after Start Job, its fields. */
export function withoutDurableFields(json: IDataObject): IDataObject {
	const drop = new Set(['durable', ...(isStartJobItem(json) ? START_JOB_FIELDS : [])]);
	return Object.fromEntries(Object.entries(json).filter(([k]) => !drop.has(k)));
}

/**
 * Top-level fields of a payload that Durable Step produced and that change with every run: the
 * fencing token, the lease (expiry, owner = this execution), a `durable` object (it carries the
 * token), Start Job's `job` (lease, counters, updated_at), this execution's id. A payload with
 * one of them is refused with digest_mismatch on every re-run.
 */
export function volatileFields(payload: unknown, executionId: string | undefined): string[] {
	if (!payload || typeof payload !== 'object' || Array.isArray(payload)) return [];
	const found: string[] = [];
	for (const [key, value] of Object.entries(payload as IDataObject)) {
		const isJob = key === 'job' && !!value && typeof value === 'object' && ('fencing_token' in value || 'lease' in value);
		const isExecution = !!executionId && typeof value === 'string' && value.includes(`n8n-exec-${executionId}`);
		if (['fencing_token', 'lease', 'durable'].includes(key) || isJob || isExecution) found.push(key);
	}
	return found;
}

function executionIdOf(ctx: IExecuteFunctions): string | undefined {
	try {
		const id = ctx.getExecutionId();
		return id ? String(id) : undefined;
	} catch {
		return undefined;
	}
}

const hinted = new WeakSet<object>();

/**
 * Begin Step's payload for item i. 1.2: by default the item without Durable Step's fields; a
 * custom payload that holds such fields fails with what to change; 1 and 1.1 keep `{{ $json }}` as it
 * was and only warn (an execution hint), once per node run.
 */
export function beginPayload(ctx: IExecuteFunctions, i: number): unknown {
	const version = Number(ctx.getNode().typeVersion ?? 1);
	const fromItem = version >= PAYLOAD_VERSION && ctx.getNodeParameter('payloadSource', i, 'item') !== 'custom';
	if (fromItem) return withoutDurableFields(ctx.getInputData()[i]?.json ?? {});
	const payload = jsonParam(ctx, 'payload', i, 'Payload', {});
	const volatile = volatileFields(payload, executionIdOf(ctx));
	if (!volatile.length) return payload;
	const fields = volatile.join(', ');
	const what = `The Payload holds ${fields}, which Durable Step produced and which change with every run`;
	const fix =
		'Set Payload to "Input Item Without Durable Step Fields" (the default), or Payload (JSON) to the business fields only, e.g. {{ { title: $json.title } }}.';
	if (version >= PAYLOAD_VERSION) {
		throw new NodeOperationError(ctx.getNode(), `${what}: every re-run would be refused with digest_mismatch`, {
			itemIndex: i,
			description: fix,
		});
	}
	if (!hinted.has(ctx)) {
		hinted.add(ctx);
		ctx.addExecutionHints({
			type: 'warning',
			location: 'outputPane',
			message: `${what}: a re-run of this step will be refused with digest_mismatch. Set Payload to the business fields only, e.g. {{ { title: $json.title } }}, or add the node again (version 1.2: its default Payload leaves these fields out).`,
		});
	}
	return payload;
}
