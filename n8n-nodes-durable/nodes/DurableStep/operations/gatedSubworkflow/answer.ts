import type { IDataObject } from 'n8n-workflow';
import type { DeclaredOutcome, LookUpVerdict, Performed, StepTicket } from '../gated/effect';
import { idAt, receiptOf } from '../gated/receipt';
import { executionIdOf, type SubworkflowAnswer, type WorkflowRef } from './workflow';

const asText = (value: unknown) => (value === undefined || value === null ? '' : String(value));

/**
 * The convention of a gated sub-workflow. It finished: the side effect is done, its first item is
 * the answer (remote id at Remote ID Path, Receipt Fields), unless that item declares otherwise:
 * `outcome: "failed"` (provably nothing was written; `retryable: false` to stop retrying) or
 * `outcome: "unknown"`. No item: done, with the operation key as the remote id.
 */
export function performedOf(answer: SubworkflowAnswer, ticket: StepTicket, remoteIdPath: string, paths: string[]): Performed {
	const json = answer.first ?? {};
	const sub = { workflow_execution_id: answer.executionId };
	if (answer.waiting) {
		// A Wait node inside: it has not finished, and what it did so far is not known.
		const message = `The sub-workflow (execution ${answer.executionId}) went into a Wait node before it finished`;
		return { ok: false, declared: { verb: 'unknown', retryable: false, message }, json: { ...json, subworkflow: sub } };
	}
	const outcome = asText(json.outcome).toLowerCase();
	if (outcome === 'failed' || outcome === 'unknown') {
		const declared: DeclaredOutcome = {
			verb: outcome === 'failed' ? 'fail' : 'unknown',
			retryable: json.retryable !== false,
			message: asText(json.message ?? json.error) || `The sub-workflow answered outcome "${outcome}"`,
		};
		return { ok: false, declared, json };
	}
	return { ok: true, remoteId: idAt(json, remoteIdPath) ?? ticket.operation_key, receipt: receiptOf(json, paths), json };
}

/**
 * A sub-workflow that failed (an error it threw, a node that stopped it) may have written part of
 * its side effect before: the attempt is unknown, never a failure to retry. A sub-workflow that
 * can prove nothing was written catches its error and answers `outcome: "failed"` instead.
 */
export function thrownOf(error: unknown, ref: WorkflowRef): { ok: false; declared: DeclaredOutcome; json: IDataObject } {
	const executionId = executionIdOf(error);
	const reason = asText((error as Error)?.message ?? error) || 'unknown error';
	const message = `The sub-workflow "${ref.name}" failed${executionId ? ` (execution ${executionId})` : ''}: ${reason}`;
	const subworkflow: IDataObject = { workflow_id: ref.id, error: reason };
	if (executionId) subworkflow.workflow_execution_id = executionId;
	return { ok: false, declared: { verb: 'unknown', retryable: false, message }, json: { subworkflow } };
}

const VERDICTS = new Set(['found', 'absent', 'undecidable']);

/**
 * The lookup sub-workflow's answer, first item: `{result: found | absent | undecidable, remote_id,
 * receipt}`. found without remote_id: the operation key stands for it (as for a side effect that
 * creates nothing). No item, another result or a Wait: the lookup proved nothing, it throws (as a
 * failing lookup sub-workflow does): the step stays unknown and the next run looks again, so that
 * a fixed lookup can still settle it. Only an answered "undecidable" sends it to review.
 */
export function verdictOf(answer: SubworkflowAnswer, ticket: StepTicket, ref: WorkflowRef): LookUpVerdict {
	const json = answer.first ?? {};
	const result = asText(json.result).toLowerCase();
	if (answer.waiting) throw new Error(`the lookup sub-workflow "${ref.name}" went into a Wait node (execution ${answer.executionId})`);
	if (!VERDICTS.has(result)) {
		const got = answer.first ? `result ${JSON.stringify(json.result ?? null)}` : 'no item';
		throw new Error(`the lookup sub-workflow "${ref.name}" (execution ${answer.executionId}) answered ${got}, not result found, absent or undecidable`);
	}
	const evidence: IDataObject = { lookup_workflow_id: ref.id, lookup_execution_id: answer.executionId };
	if (json.evidence !== undefined) evidence.reported = json.evidence as IDataObject;
	if (result !== 'found') return { result: result as LookUpVerdict['result'], evidence };
	const remoteId = idAt(json, 'remote_id') ?? ticket.operation_key;
	const receipt = json.receipt && typeof json.receipt === 'object' && !Array.isArray(json.receipt) ? (json.receipt as IDataObject) : {};
	return { result: 'found', remoteId, receipt, evidence: { ...evidence, remote_id: remoteId } };
}
