import type { IDataObject, IExecuteFunctions, INodeExecutionData } from 'n8n-workflow';
import { NodeOperationError } from 'n8n-workflow';
import { itemJob } from '../../jobOfItem';
import { jsonObject, parseJson, requiredString } from '../../params';
import { jobPath, ledgerCall } from '../../transport';
import { PROCEED, type DurableOperation, type StepResult } from '../../types';

function artifactList(ctx: IExecuteFunctions, i: number): IDataObject[] {
	const artifactsParam = ctx.getNodeParameter('artifacts', i, {}) as { artifact?: IDataObject[] };
	return (artifactsParam.artifact ?? []).map((a, n) => {
		if (!a.role || !a.uri) {
			throw new NodeOperationError(ctx.getNode(), `Artifact ${n + 1} needs a role and a URI`, {
				itemIndex: i,
				description: 'Fill in Role and URI (and SHA-256 when the artifact is a file) for every artifact.',
			});
		}
		return { role: a.role, uri: a.uri, sha256: a.sha256 || null };
	});
}

/** `POST /v1/jobs/{id}/checkpoints`; the item passes through with `durable` set. */
export async function saveCheckpointItem(
	ctx: IExecuteFunctions,
	i: number,
	item: INodeExecutionData,
): Promise<StepResult> {
	const { jobId, token } = itemJob(ctx, i);
	const phase = requiredString(ctx, 'phase', i, 'Phase');
	const options = ctx.getNodeParameter('checkpointOptions', i, {}) as IDataObject;
	const body: IDataObject = {
		fencing_token: token,
		phase,
		artifacts: artifactList(ctx, i),
		remote: jsonObject(parseJson(options.remote ?? {}, ctx, i, 'Remote IDs (JSON)', {}), ctx, i, 'Remote IDs (JSON)'),
		next_allowed_actions: String(options.nextAllowedActions ?? '')
			.split(',')
			.map((s) => s.trim())
			.filter((s) => s),
	};
	if (typeof options.taskVersion === 'number' && options.taskVersion > 0) body.task_version = options.taskVersion;

	const answer = await ledgerCall(ctx, 'POST', jobPath(jobId, '/checkpoints'), body, i, `Saving checkpoint ${phase} of job ${jobId}`);
	const checkpoint = { job_id: jobId, phase, checkpoint: answer.checkpoint ?? null, job: answer.job ?? null };
	// 1.1: a checkpoint right after a step (Done / Already Done) keeps that step's fields, so the
	// nodes after it still read $json.durable.remote_id / receipt.
	const step = item.json.durable;
	const keep = Number(ctx.getNode().typeVersion ?? 1) >= 1.1 && step && typeof step === 'object' && !Array.isArray(step);
	return { output: PROCEED, json: { ...item.json, durable: keep ? { ...(step as IDataObject), ...checkpoint } : checkpoint } };
}

export const saveCheckpoint: DurableOperation = { gate: false, start: async () => saveCheckpointItem };
