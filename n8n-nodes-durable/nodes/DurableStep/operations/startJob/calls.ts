import type { IDataObject, IExecuteFunctions } from 'n8n-workflow';
import { NodeOperationError } from 'n8n-workflow';
import { jobPath, ledgerCall, ledgerRequest, refusalError } from '../../transport';

/** What Start Job asks for one item, read from its parameters. */
export interface StartRequest {
	jobId: string;
	owner: string;
	ttlS: number;
	takeover: boolean;
	/** Task Version as asked; the job's own version can be higher or lower. */
	asked: number;
	/** Node 1.2 refuses a Task Version lower than the job's; 1 and 1.1 go on at the job's version. */
	refuseLower: boolean;
	/** `PUT /v1/jobs/{id}`'s body: task_version, pipeline, budgets (and session_id when set). */
	jobBody: IDataObject;
}

/** The lease answer (`owner`, `fencing_token`, `expires_at`, `needs_reconcile`) and the job after any new version. */
export interface Started {
	lease: IDataObject;
	job: IDataObject;
}

/**
 * `POST /v1/jobs/{id}/start`: create or get, lease, and a higher version, in one request (and one
 * ledger transaction). Returns null when the ledger has no such route (404/405: a ledger older
 * than the route), so that the caller uses the three calls instead.
 */
export async function startInOneCall(ctx: IExecuteFunctions, i: number, r: StartRequest): Promise<Started | null> {
	const body: IDataObject = {
		...r.jobBody,
		owner: r.owner,
		ttl_s: r.ttlS,
		takeover: r.takeover,
		if_lower: r.refuseLower ? 'refuse' : 'keep',
	};
	const answer = await ledgerRequest(ctx, 'POST', jobPath(r.jobId, '/start'), body, i);
	if (answer.ok) return { lease: answer.body, job: (answer.body.job as IDataObject) ?? {} };
	const { refusal } = answer;
	if (refusal.status === 404 || refusal.status === 405) return null;
	if (refusal.code === 'task_version_lower') {
		throw lowerVersion(ctx, i, r.jobId, r.asked, Number(refusal.details.current));
	}
	throw refusalError(ctx, refusal, i, refusedStep(refusal.code, r));
}

/** The three calls, for a ledger without `/start` and for a job bound to a session. */
export async function startInThreeCalls(ctx: IExecuteFunctions, i: number, r: StartRequest): Promise<Started> {
	const job = await ledgerCall(ctx, 'PUT', jobPath(r.jobId), r.jobBody, i, `Creating job ${r.jobId}`);
	const current = job.task_version as number;
	if (r.asked < current && r.refuseLower) throw lowerVersion(ctx, i, r.jobId, r.asked, current);
	const lease = await ledgerCall(
		ctx,
		'POST',
		jobPath(r.jobId, '/lease'),
		{ owner: r.owner, ttl_s: r.ttlS, takeover: r.takeover },
		i,
		`Taking the lease of job ${r.jobId}`,
	);
	let leasedJob = (lease.job as IDataObject) ?? job;
	if (r.asked > (leasedJob.task_version as number)) {
		// As POST /versions always does: the new version's steps are new operations and no approval
		// of the old version carries over. Under the token just issued, so a takeover fences it too.
		leasedJob = await ledgerCall(
			ctx,
			'POST',
			jobPath(r.jobId, '/versions'),
			{ fencing_token: lease.fencing_token, task_version: r.asked },
			i,
			`Starting task version ${r.asked} of job ${r.jobId}`,
		);
	}
	return { lease, job: leasedJob };
}

/** Which of the three steps a refusal of the one call stands for (the error's description names it). */
function refusedStep(code: string, r: StartRequest): string {
	if (code.startsWith('lease')) return `Taking the lease of job ${r.jobId}`;
	if (code === 'stale_fencing_token') return `Starting task version ${r.asked} of job ${r.jobId}`;
	return `Creating job ${r.jobId}`;
}

export function lowerVersion(ctx: IExecuteFunctions, i: number, jobId: string, asked: number, current: number) {
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
