import type { IDataObject, IExecuteFunctions } from 'n8n-workflow';
import { NodeOperationError } from 'n8n-workflow';
import { jsonObject, optionalString, parseJson, requiredString } from '../../params';
import { jobPath, ledgerCall } from '../../transport';
import { PROCEED, type DurableOperation, type StepResult } from '../../types';

/**
 * From node version 1.2 Start Job takes the lease over when the Take Over option is not added.
 * n8n starts a new execution for every run, and the lease of the previous one (finished, failed
 * or crashed: nothing tells the ledger which) outlives it by its TTL. Taking over is safe: the
 * fencing token goes up, so an older execution that is somehow still running is refused at its
 * next ledger call, and the gate never repeats a step that was sent. Versions 1 and 1.1 keep
 * waiting for the lease (n8n does not save a parameter equal to its default, so a changed default
 * needs a new version).
 */
export const TAKEOVER_BY_DEFAULT_FROM = 1.2;

export function takesOver(nodeVersion: number, options: IDataObject): boolean {
	return options.takeover === undefined ? nodeVersion >= TAKEOVER_BY_DEFAULT_FROM : options.takeover === true;
}

/**
 * `PUT /v1/jobs/{id}` (create or get), then `POST /v1/jobs/{id}/lease`, then, when Task Version
 * is higher than the job's, `POST /v1/jobs/{id}/versions` under the new token; the item is replaced.
 */
export async function startJobItem(ctx: IExecuteFunctions, i: number): Promise<StepResult> {
	const jobId = requiredString(ctx, 'jobId', i, 'Job ID');
	const owner = requiredString(ctx, 'owner', i, 'Lease Owner');
	const options = ctx.getNodeParameter('startOptions', i, {}) as IDataObject;
	const budgetsRaw = parseJson(options.budgets ?? {}, ctx, i, 'Budgets (JSON)', {});
	const asked = ctx.getNodeParameter('taskVersion', i, 1) as number;
	const nodeVersion = ctx.getNode().typeVersion;
	const body: IDataObject = {
		task_version: asked,
		pipeline: ctx.getNodeParameter('pipeline', i, 'generic') as string,
		budgets: jsonObject(budgetsRaw, ctx, i, 'Budgets (JSON)'),
	};
	const sessionId = optionalString(options.sessionId);
	if (sessionId) body.session_id = sessionId;

	const job = await ledgerCall(ctx, 'PUT', jobPath(jobId), body, i, `Creating job ${jobId}`);
	const current = job.task_version as number;
	if (asked < current && nodeVersion >= TAKEOVER_BY_DEFAULT_FROM) throw lowerVersion(ctx, i, jobId, asked, current);
	const lease = await ledgerCall(
		ctx,
		'POST',
		jobPath(jobId, '/lease'),
		{ owner, ttl_s: (options.ttlS as number) ?? 300, takeover: takesOver(nodeVersion, options) },
		i,
		`Taking the lease of job ${jobId}`,
	);
	let leasedJob = (lease.job as IDataObject) ?? job;
	if (asked > (leasedJob.task_version as number)) {
		// As POST /versions always does: the new version's steps are new operations and no approval
		// of the old version carries over. Under the token just issued, so a takeover fences it too.
		leasedJob = await ledgerCall(
			ctx,
			'POST',
			jobPath(jobId, '/versions'),
			{ fencing_token: lease.fencing_token, task_version: asked },
			i,
			`Starting task version ${asked} of job ${jobId}`,
		);
	}
	const json: IDataObject = {
		job_id: jobId,
		fencing_token: lease.fencing_token as number,
		phase: (leasedJob.phase as string | null) ?? null,
		task_version: leasedJob.task_version as number,
		status: leasedJob.status as string,
		needs_reconcile: (lease.needs_reconcile as IDataObject[]) ?? [],
		lease: { owner: lease.owner, fencing_token: lease.fencing_token, expires_at: lease.expires_at },
		job: leasedJob,
	};
	if (asked < (leasedJob.task_version as number)) {
		// Versions 1 and 1.1: the job goes on at its own version, and the item says so.
		json.task_version_note =
			`Task Version ${asked} is lower than the job's task version ${leasedJob.task_version as number}; ` +
			'the job runs at its own version (node version 1.2 refuses this)';
	}
	return { output: PROCEED, json };
}

function lowerVersion(ctx: IExecuteFunctions, i: number, jobId: string, asked: number, current: number) {
	return new NodeOperationError(
		ctx.getNode(),
		`task_version_lower: Task Version ${asked} is lower than job ${jobId}'s task version ${current}`,
		{
			itemIndex: i,
			description:
				`Versions only go up. Set Task Version to ${current} to go on with the job as it is, or higher to start ` +
				'a new version (its steps run again, and approvals of the old version do not carry over), or use a new Job ID.',
		},
	);
}

export const startJob: DurableOperation = { gate: false, start: async () => startJobItem };
