import type { IDataObject, IExecuteFunctions } from 'n8n-workflow';
import { jsonObject, optionalString, parseJson, requiredString } from '../../params';
import { jobPath, ledgerCall } from '../../transport';
import { PROCEED, type DurableOperation, type StepResult } from '../../types';

/** `PUT /v1/jobs/{id}` (create or get), then `POST /v1/jobs/{id}/lease`; the item is replaced. */
export async function startJobItem(ctx: IExecuteFunctions, i: number): Promise<StepResult> {
	const jobId = requiredString(ctx, 'jobId', i, 'Job ID');
	const owner = requiredString(ctx, 'owner', i, 'Lease Owner');
	const options = ctx.getNodeParameter('startOptions', i, {}) as IDataObject;
	const budgetsRaw = parseJson(options.budgets ?? {}, ctx, i, 'Budgets (JSON)', {});
	const body: IDataObject = {
		task_version: ctx.getNodeParameter('taskVersion', i, 1) as number,
		pipeline: ctx.getNodeParameter('pipeline', i, 'generic') as string,
		budgets: jsonObject(budgetsRaw, ctx, i, 'Budgets (JSON)'),
	};
	const sessionId = optionalString(options.sessionId);
	if (sessionId) body.session_id = sessionId;

	const job = await ledgerCall(ctx, 'PUT', jobPath(jobId), body, i, `Creating job ${jobId}`);
	const lease = await ledgerCall(
		ctx,
		'POST',
		jobPath(jobId, '/lease'),
		{ owner, ttl_s: (options.ttlS as number) ?? 300, takeover: options.takeover === true },
		i,
		`Taking the lease of job ${jobId}`,
	);
	const leasedJob = (lease.job as IDataObject) ?? job;
	return {
		output: PROCEED,
		json: {
			job_id: jobId,
			fencing_token: lease.fencing_token as number,
			phase: (leasedJob.phase as string | null) ?? null,
			task_version: leasedJob.task_version as number,
			status: leasedJob.status as string,
			needs_reconcile: (lease.needs_reconcile as IDataObject[]) ?? [],
			lease: { owner: lease.owner, fencing_token: lease.fencing_token, expires_at: lease.expires_at },
			job: leasedJob,
		},
	};
}

export const startJob: DurableOperation = { gate: false, start: async () => startJobItem };
