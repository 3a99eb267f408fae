import type { IDataObject, IExecuteFunctions } from 'n8n-workflow';
import { jsonObject, optionalString, parseJson, requiredString } from '../../params';
import { PROCEED, RUNNING_ELSEWHERE, type DurableOperation, type ItemStep, type StepResult } from '../../types';
import { EDITOR_DEFAULTS_FROM } from '../../editorDefaults';
import { LIVENESS_FROM } from '../../liveness';
import { startInOneCall, startInThreeCalls, type StartRequest, type Started } from './calls';

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

/**
 * From node version 1.4 Start Job's takeover respects a live holder (liveness.ts): it waits up to
 * this long for the other execution to finish its step (or to die), then takes over.
 */
export const DEFAULT_WAIT_S = 30;

export function takesOver(nodeVersion: number, options: IDataObject): boolean {
	return options.takeover === undefined ? nodeVersion >= TAKEOVER_BY_DEFAULT_FROM : options.takeover === true;
}

function readRequest(ctx: IExecuteFunctions, i: number): StartRequest {
	const jobId = requiredString(ctx, 'jobId', i, 'Job ID');
	const owner = requiredString(ctx, 'owner', i, 'Lease Owner');
	const options = ctx.getNodeParameter('startOptions', i, {}) as IDataObject;
	const budgetsRaw = parseJson(options.budgets ?? {}, ctx, i, 'Budgets (JSON)', {});
	const asked = ctx.getNodeParameter('taskVersion', i, 1) as number;
	const nodeVersion = ctx.getNode().typeVersion;
	const jobBody: IDataObject = {
		task_version: asked,
		pipeline: ctx.getNodeParameter('pipeline', i, 'generic') as string,
		budgets: jsonObject(budgetsRaw, ctx, i, 'Budgets (JSON)'),
	};
	const sessionId = optionalString(options.sessionId);
	if (sessionId) jobBody.session_id = sessionId;
	return {
		jobId,
		owner,
		ttlS: (options.ttlS as number) ?? 300,
		takeover: takesOver(nodeVersion, options),
		asked,
		refuseLower: nodeVersion >= TAKEOVER_BY_DEFAULT_FROM,
		jobBody,
		waitS: nodeVersion >= LIVENESS_FROM ? ((options.waitForHolderS as number | undefined) ?? DEFAULT_WAIT_S) : null,
		leaveQuietly: nodeVersion >= EDITOR_DEFAULTS_FROM,
	};
}

/**
 * Node 1.5, past Wait for Live Holder: another execution of this job is still working (the same
 * trigger fired twice, a re-run while the first runs). This one wrote nothing and leaves by
 * Running Elsewhere, green: the event is being handled by the holder.
 */
function elsewhereItem(r: StartRequest, holder: IDataObject, waitedMs: number): StepResult {
	const waited = Math.round(waitedMs / 100) / 10;
	const owner = String(holder.owner ?? 'another execution');
	return {
		output: RUNNING_ELSEWHERE,
		json: {
			job_id: r.jobId,
			status: 'running_elsewhere',
			running_elsewhere: {
				owner,
				fencing_token: (holder.fencing_token as number | undefined) ?? null,
				live_until: (holder.live_until_iso as string | undefined) ?? null,
				waited_s: waited,
				message:
					`Job ${r.jobId} is being worked on by ${owner}, which is still sending heartbeats; this execution waited ` +
					`${waited} s (Wait for Live Holder) and wrote nothing. That execution does the job's steps; a later run answers Done Before.`,
			},
		},
	};
}

function jobItem(r: StartRequest, started: Started): StepResult {
	if (started.elsewhere) return elsewhereItem(r, started.elsewhere, started.waitedMs ?? 0);
	const { lease, job } = started;
	const json: IDataObject = {
		job_id: r.jobId,
		fencing_token: lease.fencing_token as number,
		phase: (job.phase as string | null) ?? null,
		task_version: job.task_version as number,
		status: job.status as string,
		needs_reconcile: (lease.needs_reconcile as IDataObject[]) ?? [],
		lease: { owner: lease.owner, fencing_token: lease.fencing_token, expires_at: lease.expires_at },
		job,
	};
	if (r.waitS !== null && started.waitedMs !== undefined && started.waitedMs >= 1000)
		json.waited_for_holder_s = Math.round(started.waitedMs / 100) / 10;
	if (r.asked < (job.task_version as number)) {
		// Versions 1 and 1.1: the job goes on at its own version, and the item says so.
		json.task_version_note =
			`Task Version ${r.asked} is lower than the job's task version ${job.task_version as number}; ` +
			'the job runs at its own version (node version 1.2 refuses this)';
	}
	return { output: PROCEED, json };
}

/**
 * Per node execution: `POST /v1/jobs/{id}/start` (create or get, lease, a higher version: one
 * request), or the three calls `PUT /v1/jobs/{id}`, `POST .../lease`, `POST .../versions` when
 * the ledger predates `/start` (remembered for the rest of this execution's items) or a session
 * is to be bound (binding calls the agent service, which the one transaction cannot include).
 * The item is the same either way.
 */
export function startJobSteps(): ItemStep {
	let oneCall = true;
	return async (ctx, i) => {
		const r = readRequest(ctx, i);
		let started: Started | null = null;
		if (oneCall && r.jobBody.session_id === undefined) {
			started = await startInOneCall(ctx, i, r);
			if (started === null) oneCall = false;
		}
		return jobItem(r, started ?? (await startInThreeCalls(ctx, i, r)));
	};
}

export const startJob: DurableOperation = { gate: false, start: async () => startJobSteps() };
