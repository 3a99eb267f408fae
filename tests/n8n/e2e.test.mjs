// End-to-end: the packed n8n-nodes-durable package inside a real n8n 2.40.7 (`n8n execute`),
// against a real ledger service and a local HTTP sink that counts writes.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, test } from 'node:test';
import { RUNNER_TOKEN, startLedger } from '../../n8n-nodes-durable/test/ledger.mjs';
import { executionMs, fillTemplate, installPackage, makeN8n, nodeMs, outputsOf } from './harness.mjs';
import { startSink } from './sink.mjs';

const CRED_ID = 'durableLedgerCred1';
const BENCH_RUNS = Number(process.env.DURABLE_BENCH_RUNS ?? 5);
let ledger;
let sink;
let n8n;
let pack;

before(async () => {
	ledger = await startLedger();
	sink = await startSink();
	n8n = await makeN8n();
	pack = installPackage(n8n.userFolder);
	await n8n.importCredentials([
		{ id: CRED_ID, name: 'Durable Ledger (test)', type: 'durableLedgerApi', data: { baseUrl: ledger.url, token: RUNNER_TOKEN } },
	]);
	const gated = (id, jobId, route, timeoutMs) =>
		fillTemplate('gated-write.workflow.json', {
			WORKFLOW_ID: id,
			JOB_ID: jobId,
			CREDENTIAL_ID: CRED_ID,
			SINK_URL: `${sink.url}${route}`,
			TIMEOUT_MS: timeoutMs,
		});
	await n8n.importWorkflows([
		gated('durableGatedOk', 'e2e-article-1', '/write', 5000),
		gated('durableGatedHang', 'e2e-article-2', '/write-hang', 1500),
		// a fresh job per execution, so every run takes the dispatch path (for the benchmark)
		gated('durableGatedBench', "={{ 'bench-' + $execution.id }}", '/write', 5000),
		fillTemplate('plain-write.workflow.json', { WORKFLOW_ID: 'durablePlainBench', SINK_URL: `${sink.url}/write`, TIMEOUT_MS: 5000 }),
		// Gated Sub-workflow: the parent runs a sub-workflow that POSTs to the sink, and its lookup.
		...subworkflows(),
	]);
	for (const id of SUBWORKFLOWS) await n8n.publishWorkflow(id);
});

const SUBWORKFLOWS = ['durableSubWrite', 'durableSubWriteHang', 'durableSubLookup'];

function subworkflows() {
	const sub = (id, route, timeoutMs) => fillTemplate('subworkflow-write.workflow.json', { WORKFLOW_ID: id, SINK_URL: `${sink.url}${route}`, TIMEOUT_MS: timeoutMs });
	const parent = (id, jobId, subId) =>
		fillTemplate('gated-subworkflow.workflow.json', { WORKFLOW_ID: id, JOB_ID: jobId, CREDENTIAL_ID: CRED_ID, SUB_ID: subId, LOOKUP_ID: 'durableSubLookup' });
	return [
		sub('durableSubWrite', '/write', 5000),
		sub('durableSubWriteHang', '/write-hang', 1500),
		fillTemplate('subworkflow-lookup.workflow.json', { WORKFLOW_ID: 'durableSubLookup', FIND_URL: `${sink.url}/find` }),
		parent('durableGatedSubOk', 'e2e-sub-1', 'durableSubWrite'),
		parent('durableGatedSubHang', 'e2e-sub-2', 'durableSubWriteHang'),
	];
}

after(async () => {
	await sink?.close();
	await ledger?.stop();
	if (process.env.DURABLE_KEEP_N8N) console.log(`n8n user folder kept: ${n8n?.userFolder}`);
	else n8n?.cleanup();
});

function counts(outputs) {
	return outputs.map((o) => o.length);
}

test('e2e_second_run_routes_to_already_done_and_writes_once', async () => {
	const before = sink.state.writes;
	const first = await n8n.execute('durableGatedOk');
	assert.equal(first.code, 0, first.stderr);
	assert.deepEqual(counts(outputsOf(first.run, 'Begin Step')), [1, 0, 0]);
	const recorded = outputsOf(first.run, 'Record Outcome')[0][0];
	assert.equal(recorded.durable.state, 'CONFIRMED');
	assert.equal(recorded.durable.remote_id, 'obj-' + (before + 1));
	assert.equal(sink.state.writes, before + 1);

	const second = await n8n.execute('durableGatedOk');
	assert.equal(second.code, 0, second.stderr);
	assert.deepEqual(counts(outputsOf(second.run, 'Begin Step')), [0, 1, 0]);
	assert.equal(outputsOf(second.run, 'Create Draft'), null, 'the side effect did not run again');
	const done = outputsOf(second.run, 'Already Done')[0][0];
	assert.equal(done.durable.decision, 'reuse_receipt');
	assert.equal(done.durable.remote_id, recorded.durable.remote_id);
	assert.equal(sink.state.writes, before + 1, 'the sink counted exactly one write');
});

test('e2e_lost_response_is_unknown_and_next_run_needs_attention', async () => {
	const before = sink.state.writes;
	const first = await n8n.execute('durableGatedHang');
	assert.equal(first.code, 0, first.stderr);
	assert.deepEqual(counts(outputsOf(first.run, 'Begin Step')), [1, 0, 0]);
	const draft = outputsOf(first.run, 'Create Draft');
	assert.deepEqual(counts(draft), [0, 1], 'the timeout went to the error output');
	const recorded = outputsOf(first.run, 'Record Outcome')[0][0];
	assert.equal(recorded.durable.recorded, 'outcome');
	assert.equal(recorded.durable.side_effect_error.errorKind, 'timeout');
	assert.equal(recorded.durable.state, 'UNKNOWN');
	assert.equal(sink.state.writes, before + 1, 'the write happened, the answer was lost');

	const second = await n8n.execute('durableGatedHang');
	assert.equal(second.code, 0, second.stderr);
	assert.deepEqual(counts(outputsOf(second.run, 'Begin Step')), [0, 0, 1], 'Needs Attention, not Proceed');
	assert.equal(outputsOf(second.run, 'Create Draft'), null);
	const attention = outputsOf(second.run, 'Needs Attention')[0][0];
	assert.ok(['outcome_unknown', 'needs_review'].includes(attention.durable.reason), attention.durable.reason);
	assert.ok(attention.durable.explanation.length > 20);
	assert.equal(sink.state.writes, before + 1, 'no second write');
});

test('e2e_gated_subworkflow_writes_once_and_the_second_run_is_done_before', async () => {
	const before = sink.state.writes;
	const first = await n8n.execute('durableGatedSubOk');
	assert.equal(first.code, 0, first.stderr);
	assert.deepEqual(counts(outputsOf(first.run, 'Create Draft')), [1, 0, 0], JSON.stringify(outputsOf(first.run, 'Create Draft')));
	const done = outputsOf(first.run, 'Done')[0][0];
	assert.equal(done.durable.state, 'CONFIRMED');
	assert.equal(done.id, 'obj-' + (before + 1), "Done: the sub-workflow's answer");
	assert.equal(done.durable.remote_id, done.id);
	assert.equal(sink.state.writes, before + 1);
	const sent = JSON.parse(sink.state.bodies.at(-1));
	assert.equal(sent.operation_key, done.durable.operation_key, 'the sub-workflow got the step ticket');

	const second = await n8n.execute('durableGatedSubOk');
	assert.equal(second.code, 0, second.stderr);
	assert.deepEqual(counts(outputsOf(second.run, 'Create Draft')), [0, 1, 0]);
	const again = outputsOf(second.run, 'Done Before')[0][0];
	assert.deepEqual([again.id, again.created, again.durable.remote_id], [done.id, true, done.id], 'the receipt reads like Done');
	assert.equal(sink.state.writes, before + 1, 'the sink counted exactly one write');
});

test('e2e_gated_subworkflow_lost_answer_is_unknown_and_the_lookup_subworkflow_finds_it', async () => {
	const before = sink.state.writes;
	const first = await n8n.execute('durableGatedSubHang');
	assert.equal(first.code, 0, first.stderr);
	assert.deepEqual(counts(outputsOf(first.run, 'Create Draft')), [0, 0, 1], 'the sub-workflow failed (timeout): Attention');
	const attention = outputsOf(first.run, 'Attention')[0][0];
	assert.equal(attention.durable.state, 'UNKNOWN');
	assert.match(attention.subworkflow.error, /timeout|timed out|aborted/i);
	assert.equal(sink.state.writes, before + 1, 'the write happened, the answer was lost');

	const second = await n8n.execute('durableGatedSubHang');
	assert.equal(second.code, 0, second.stderr);
	assert.deepEqual(counts(outputsOf(second.run, 'Create Draft')), [0, 1, 0], JSON.stringify(outputsOf(second.run, 'Create Draft')));
	const found = outputsOf(second.run, 'Done Before')[0][0];
	assert.equal(found.durable.lookup.verdict, 'found');
	assert.equal(found.durable.remote_id, `obj-${before + 1}`);
	assert.equal(sink.state.writes, before + 1, 'no second write');
});

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

test('e2e_measure_gated_step_overhead', async () => {
	const samples = { gated: { exec: [], proc: [], durable: [], http: [] }, plain: { exec: [], proc: [], http: [] } };
	for (let i = 0; i < BENCH_RUNS; i++) {
		const g = await n8n.execute('durableGatedBench');
		assert.equal(g.code, 0, g.stderr);
		assert.equal(outputsOf(g.run, 'Record Outcome')[0][0].durable.state, 'CONFIRMED');
		samples.gated.exec.push(executionMs(g.run));
		samples.gated.proc.push(g.ms);
		samples.gated.durable.push(['Start Job', 'Begin Step', 'Record Outcome'].map((n) => nodeMs(g.run, n)));
		samples.gated.http.push(nodeMs(g.run, 'Create Draft'));
		const p = await n8n.execute('durablePlainBench');
		assert.equal(p.code, 0, p.stderr);
		samples.plain.exec.push(executionMs(p.run));
		samples.plain.proc.push(p.ms);
		samples.plain.http.push(nodeMs(p.run, 'Create Draft'));
	}
	const col = (k) => median(samples.gated.durable.map((r) => r[k]));
	const report = {
		runs: BENCH_RUNS,
		package: pack,
		execution_ms_median: { gated: median(samples.gated.exec), plain: median(samples.plain.exec) },
		process_ms_median: { gated: Math.round(median(samples.gated.proc)), plain: Math.round(median(samples.plain.proc)) },
		// the side-effect HTTP Request node to the local sink, for scale: n8n's own per-node cost
		node_ms_median: {
			start_job: col(0),
			begin_step: col(1),
			record_outcome: col(2),
			http_request_gated: median(samples.gated.http),
			http_request_plain: median(samples.plain.http),
		},
		samples,
	};
	report.overhead_ms_per_gated_step = report.execution_ms_median.gated - report.execution_ms_median.plain;
	console.log(`DURABLE_E2E_RESULTS ${JSON.stringify(report)}`);
	if (process.env.DURABLE_E2E_RESULTS) fs.writeFileSync(process.env.DURABLE_E2E_RESULTS, JSON.stringify(report, null, 2));
});
