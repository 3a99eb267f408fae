import type { IDataObject, IExecuteFunctions } from 'n8n-workflow';
import { NodeOperationError, sleep } from 'n8n-workflow';
import { LIVE_S, POLL_MS } from '../../liveness';
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
	/** Node 1.4: seconds to wait for a live holder (heartbeats) before Running Elsewhere; null: no liveness. */
	waitS: number | null;
	/** Node 1.5: past the wait, leave by the Running Elsewhere output (green) instead of failing. */
	leaveQuietly: boolean;
}

/** The lease answer (`owner`, `fencing_token`, `expires_at`, `needs_reconcile`) and the job after any new version. */
export interface Started {
	lease: IDataObject;
	job: IDataObject;
	/** How long Start Job waited for a live holder (node 1.4). */
	waitedMs?: number;
	/** Node 1.5: past Wait for Live Holder, the holder as the ledger named it (409 holder_live's details); nothing was written. */
	elsewhere?: IDataObject;
}

/** Past Wait for Live Holder: another execution is still working on this job; nothing was written. */
function runningElsewhere(ctx: IExecuteFunctions, i: number, r: StartRequest, details: IDataObject, began: number) {
	const waited = Math.round((Date.now() - began) / 100) / 10;
	return new NodeOperationError(
		ctx.getNode(),
		`running_elsewhere: job ${r.jobId} is being worked on by ${String(details.owner)} (waited ${waited} s)`,
		{
			itemIndex: i,
			description:
				'Another execution of this job (the same trigger fired twice, a re-run while the first still runs) is still ' +
				'working and sending heartbeats; this execution wrote nothing. Run it again once that one is done (its steps ' +
				'then answer Done Before), or raise Wait for Live Holder. A holder that died is taken over within ' +
				`${LIVE_S} s of its last heartbeat.`,
		},
	);
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
	if (r.waitS !== null) Object.assign(body, { live_s: LIVE_S, if_live: 'wait' });
	const began = Date.now();
	let answer = await ledgerRequest(ctx, 'POST', jobPath(r.jobId, '/start'), body, i);
	// A live holder (another execution of this job is working: its heartbeats are recent): wait
	// for it to finish its step or to die (no beat for LIVE_S), then take over. Nothing is written
	// while waiting; the steps it did answer Done Before here.
	while (!answer.ok && answer.refusal.code === 'holder_live' && r.waitS !== null) {
		if (Date.now() - began >= r.waitS * 1000) {
			if (!r.leaveQuietly) throw runningElsewhere(ctx, i, r, answer.refusal.details, began);
			return { lease: {}, job: {}, waitedMs: Date.now() - began, elsewhere: answer.refusal.details ?? {} };
		}
		await sleep(POLL_MS);
		answer = await ledgerRequest(ctx, 'POST', jobPath(r.jobId, '/start'), body, i);
	}
	if (answer.ok) {
		const waited = Date.now() - began;
		return { lease: answer.body, job: (answer.body.job as IDataObject) ?? {}, waitedMs: waited };
	}
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
