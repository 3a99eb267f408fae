// The n8n section of `make bench`: what a gated step costs inside real n8n executions, for the
// Begin Step / Record Outcome pattern and for the one-node Gated HTTP Request, side by side.
//
// Every round runs each workflow once, interleaved (gated and plain of the same shape one after
// the other), so that the machine's drift falls on both sides of a difference; the report gives
// medians over rounds of the per-round differences. Times are n8n's own: the execution's
// startedAt..stoppedAt and each node's executionTime, from the run data `n8n execute` prints.
import { executionMs, nodeMs } from './harness.mjs';

export const TARGETS = { overhead_ms_per_gated_step: 25, start_job_ms: 30 };

export const median = (xs) => (xs.length ? [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] : null);
const round1 = (x) => (x === null ? null : Math.round(x * 10) / 10);

/** n8n's times of one execution: the whole, Start Job, the other Durable Step nodes, the HTTP Request nodes. */
export function timesOf(run, workflow) {
	const byType = (pred) => workflow.nodes.filter(pred).reduce((s, n) => s + nodeMs(run, n.name), 0);
	const durable = (n) => n.type.endsWith('.durableStep');
	return {
		exec: executionMs(run),
		start_job: nodeMs(run, 'Start Job'),
		durable_steps: byType((n) => durable(n) && n.name !== 'Start Job'),
		http: byType((n) => n.type === 'n8n-nodes-base.httpRequest'),
	};
}

/**
 * One pattern's numbers from its rounds: `one` (one gated step) and `many` (`steps` gated steps)
 * against the plain workflows of the same shape (`plainOne`, `plainMany`), each a list of timesOf.
 * overhead = gated - plain execution; per step without Start Job = (overhead - Start Job) / steps.
 */
export function patternReport({ one, many, plainOne, plainMany, steps }) {
	const diffs = (g, p, f) => g.map((x, i) => f(x, p[i]));
	const out = {};
	if (one?.length) {
		out.one_step = {
			execution_ms: median(one.map((t) => t.exec)),
			plain_execution_ms: median(plainOne.map((t) => t.exec)),
			overhead_ms: median(diffs(one, plainOne, (g, p) => g.exec - p.exec)),
			start_job_ms: round1(median(one.map((t) => t.start_job))),
			step_nodes_ms: round1(median(one.map((t) => t.durable_steps))),
		};
	}
	if (many?.length) {
		out.steps = steps;
		out.n_steps = {
			execution_ms: median(many.map((t) => t.exec)),
			plain_execution_ms: median(plainMany.map((t) => t.exec)),
			overhead_ms: median(diffs(many, plainMany, (g, p) => g.exec - p.exec)),
			start_job_ms: round1(median(many.map((t) => t.start_job))),
			overhead_ms_per_step_without_start_job: round1(
				median(diffs(many, plainMany, (g, p) => (g.exec - p.exec - g.start_job) / steps)),
			),
			step_nodes_ms_per_step: round1(median(many.map((t) => t.durable_steps / steps))),
		};
	}
	return out;
}

/** The targets against the one-node pattern's numbers (the n-step workflow for the per-step cost). */
export function targetsOf(oneNode) {
	const perStep = oneNode?.n_steps?.overhead_ms_per_step_without_start_job ?? null;
	const startJob = oneNode?.n_steps?.start_job_ms ?? oneNode?.one_step?.start_job_ms ?? null;
	const row = (value, target) => ({ value, target_ms: target, met: value === null ? null : value <= target });
	return {
		overhead_ms_per_gated_step_one_node: row(perStep, TARGETS.overhead_ms_per_gated_step),
		start_job_ms: row(startJob, TARGETS.start_job_ms),
	};
}
