// The node's routing (version 1.1): Begin Step's optional Look Up output, Report Lookup, and
// Record Outcome's Done / Needs Attention. A fake IExecuteFunctions, a REAL ledger service.
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { after, before, describe, test } from 'node:test';
import { DurableStep, runNode } from './fake-context.mjs';
import { EDITOR_TOKEN, RUNNER_TOKEN, startLedger } from './ledger.mjs';

const require = createRequire(import.meta.url);
const { configuredOutputs, OUTPUTS_EXPRESSION } = require('../dist/nodes/DurableStep/outputs.js');

let ledger;
let creds;
let seq = 0;
const uniqueJob = (name) => `${name}-${process.pid}-${++seq}`;
const V = 1.1;

before(async () => {
	ledger = await startLedger();
	creds = { baseUrl: ledger.url, token: RUNNER_TOKEN };
});
after(async () => {
	await ledger?.stop();
});

const run = (params, items = [{ json: {} }], extra = {}) =>
	runNode({ items, credentials: creds, params, nodeVersion: V, ...extra }).then((r) => r.out);

async function startJob(jobId) {
	const out = await run({ operation: 'startJob', jobId, taskVersion: 1, pipeline: 'generic', owner: 'exec-A', startOptions: { takeover: true } });
	return out[0][0].json.fencing_token;
}

const beginParams = (jobId, token, options = {}) => ({
	operation: 'beginStep',
	jobId,
	fencingToken: token,
	action: 'insert_order_row',
	payload: (i, item) => item.json,
	beginOptions: { routeToLookUp: true, ...options },
});

/** A step the previous run dispatched and never recorded (it died after sending). */
async function leftInFlight(name) {
	const jobId = uniqueJob(name);
	const token = await startJob(jobId);
	const first = await run(beginParams(jobId, token), [{ json: { order: 7 } }]);
	assert.equal(first[0].length, 1);
	return { jobId, token, key: first[0][0].json.durable.operation_key };
}

const sizes = (out) => out.map((o) => o.length);

const lookupParams = (key, token, attempt, result, extra = {}) => ({
	operation: 'reportLookup',
	operationKey: key,
	fencingToken: token,
	attempt,
	lookupResult: result,
	remoteId: (i, item) => item.json.id ?? '',
	receipt: (i, item) => item.json,
	evidence: {},
	...extra,
});

describe('outputs', () => {
	test('outputs_per_operation_and_version', () => {
		const names = (p, v) => configuredOutputs(p, v).map((o) => o.displayName ?? '(main)');
		assert.deepEqual(names({ operation: 'beginStep', beginOptions: {} }, V), ['Proceed', 'Done Before', 'Attention']);
		assert.deepEqual(names({ operation: 'beginStep', beginOptions: { routeToLookUp: true } }, V), [
			'Proceed',
			'Done Before',
			'Attention',
			'Look Up',
		]);
		assert.deepEqual(names({ operation: 'reportLookup' }, V), ['Proceed', 'Done Before', 'Attention']);
		assert.deepEqual(names({ operation: 'recordOutcome' }, V), ['Done', 'Attention']);
		assert.deepEqual(names({ operation: 'saveCheckpoint' }, V), ['(main)']);
		assert.deepEqual(names({ operation: 'recordOutcome' }, 1), ['Proceed', 'Done Before', 'Attention']);
		assert.deepEqual(names({}, V), ['Proceed', 'Done Before', 'Attention']); // operation's default
		const d = new DurableStep().description;
		assert.deepEqual(d.version, [1, 1.1, 1.2, 1.3, 1.4, 1.5]);
		assert.equal(d.defaultVersion, 1.5);
		assert.equal(d.outputs, OUTPUTS_EXPRESSION);
		// The expression n8n evaluates is the same function, self-contained.
		const body = OUTPUTS_EXPRESSION.slice(3, -2);
		const evaluate = new Function('$parameter', '$nodeVersion', `return ${body};`);
		assert.deepEqual(evaluate({ operation: 'recordOutcome' }, V), [
			{ type: 'main', displayName: 'Done' },
			{ type: 'main', displayName: 'Attention' },
		]);
	});
});

describe('look up', () => {
	test('begin_without_reconciler_routes_to_look_up', async () => {
		const { jobId, token, key } = await leftInFlight('lookup-route');
		const out = await run(beginParams(jobId, token), [{ json: { order: 7 } }]);
		assert.deepEqual(sizes(out), [0, 0, 0, 1]);
		const d = out[3][0].json.durable;
		assert.equal(out[3][0].json.order, 7);
		assert.deepEqual(
			{ decision: d.decision, reason: d.reason, key: d.operation_key, token: d.fencing_token, attempt: d.attempt, state: d.state },
			{ decision: 'reconcile', reason: 'lookup_required', key, token, attempt: 1, state: 'SENT' },
		);
		assert.match(d.explanation, /Report Lookup/);
		// Nothing escalated: the operation is still SENT, waiting for the lookup.
		const again = await run(beginParams(jobId, token), [{ json: { order: 7 } }]);
		assert.deepEqual(sizes(again), [0, 0, 0, 1]);
	});

	test('begin_without_the_option_behaves_as_before', async () => {
		const { jobId, token } = await leftInFlight('lookup-off');
		const out = await run({ ...beginParams(jobId, token), beginOptions: {} }, [{ json: { order: 7 } }]);
		assert.deepEqual(sizes(out), [0, 0, 1]);
		// As in version 1: auto-reconcile asks the ledger, which has no reconciler: review queue.
		assert.equal(out[2][0].json.durable.reason, 'needs_review');
	});

	test('batch_begin_routes_each_item_to_look_up', async () => {
		const jobId = uniqueJob('lookup-batch');
		const token = await startJob(jobId);
		const items = [{ json: { order: 1 } }, { json: { order: 2 } }];
		const keyed = (i) => ({ ...beginParams(jobId, token), beginOptions: { routeToLookUp: true, operationKey: `${jobId}:row:${i}` } });
		const params = { ...keyed(0), beginOptions: (i) => keyed(i).beginOptions };
		assert.deepEqual(sizes(await run(params, items)), [2, 0, 0, 0]);
		const out = await run(params, items);
		assert.deepEqual(sizes(out), [0, 0, 0, 2]);
		assert.deepEqual(out[3].map((x) => x.pairedItem.item), [0, 1]);
	});

	test('report_found_goes_to_already_done_with_the_receipt', async () => {
		const { jobId, token, key } = await leftInFlight('lookup-found');
		const out = await run(lookupParams(key, token, 1, 'found'), [{ json: { id: 4711, order_key: key } }]);
		assert.deepEqual(sizes(out), [0, 1, 0]);
		const d = out[1][0].json.durable;
		assert.equal(d.decision, 'reuse_receipt');
		assert.equal(d.remote_id, '4711');
		assert.deepEqual(d.receipt, { remote_id: '4711', id: 4711, order_key: key });
		assert.equal(d.lookup.outcome, 'applied');
		const next = await run(beginParams(jobId, token), [{ json: { order: 7 } }]);
		assert.deepEqual(sizes(next), [0, 1, 0, 0]);
	});

	test('report_absent_dispatches_a_new_attempt_on_proceed', async () => {
		const { token, key } = await leftInFlight('lookup-absent');
		const out = await run(lookupParams(key, token, 1, 'absent', { evidence: { rows: 0 } }), [{ json: {} }]);
		assert.deepEqual(sizes(out), [1, 0, 0]);
		const d = out[0][0].json.durable;
		assert.deepEqual([d.decision, d.state, d.attempt, d.operation_key, d.fencing_token], ['dispatch', 'SENT', 2, key, token]);
		// The report sent again (its answer was lost) never fails attempt 2.
		const again = await run(lookupParams(key, token, 1, 'absent'), [{ json: {} }]);
		assert.deepEqual(sizes(again), [0, 0, 1]);
		assert.equal(again[2][0].json.durable.reason, 'lookup_not_applied');
		assert.equal(again[2][0].json.durable.lookup.outcome, 'not_in_flight');
	});

	test('report_undecidable_goes_to_needs_attention_for_review', async () => {
		const { token, key } = await leftInFlight('lookup-undecidable');
		const out = await run(lookupParams(key, token, 1, 'undecidable'), [{ json: {} }]);
		assert.deepEqual(sizes(out), [0, 0, 1]);
		assert.deepEqual([out[2][0].json.durable.reason, out[2][0].json.durable.state], ['needs_review', 'NEEDS_REVIEW']);
	});

	test('report_refuses_bad_parameters_before_calling_the_ledger', async () => {
		const { token, key } = await leftInFlight('lookup-bad');
		await assert.rejects(run(lookupParams(key, token, 1, 'maybe')), /"Result" must be found, absent or undecidable/);
		await assert.rejects(run(lookupParams(key, token, '', 'absent')), /"Attempt" must be a positive integer/);
		await assert.rejects(run(lookupParams(key, token, 1, 'found'), [{ json: {} }]), /"Remote ID" is empty/);
		// From 1.3 a Result left at its default is no verdict (before, the default was Found).
		await assert.rejects(run(lookupParams(key, token, 1, undefined)), /"Result" must be found, absent or undecidable, got ""/);
		const results = new DurableStep().description.properties.filter((p) => p.name === 'lookupResult');
		const at = (v) => results.find((p) => p.displayOptions.show['@version'][0]._cnd[v]);
		assert.deepEqual([at('lt').default, at('gte').default], ['found', '']);
	});

	test('report_with_a_stale_token_goes_to_needs_attention', async () => {
		const { jobId, token, key } = await leftInFlight('lookup-stale');
		const newer = await run({ operation: 'startJob', jobId, owner: 'exec-B', startOptions: { takeover: true } });
		assert.ok(newer[0][0].json.fencing_token > token);
		const out = await run(lookupParams(key, token, 1, 'absent'), [{ json: {} }]);
		assert.deepEqual(sizes(out), [0, 0, 1]);
		assert.equal(out[2][0].json.durable.reason, 'stale_fencing_token');
	});
});

describe('record outcome routes', () => {
	async function dispatched(name) {
		const jobId = uniqueJob(name);
		const token = await startJob(jobId);
		const out = await run(beginParams(jobId, token, { routeToLookUp: false }), [{ json: { order: 1 } }]);
		return { jobId, token, key: out[0][0].json.durable.operation_key };
	}
	const recordParams = (key, token) => ({
		operation: 'recordOutcome',
		operationKey: key,
		fencingToken: token,
		outcome: 'auto',
		remoteId: (i, it) => it.json.id ?? '',
		receipt: (i, it) => it.json,
	});

	test('confirmed_goes_to_done_with_the_already_done_shape', async () => {
		const { jobId, token, key } = await dispatched('rec-done');
		const out = await run(recordParams(key, token), [{ json: { id: 55, row: 'a' } }]);
		assert.deepEqual(sizes(out), [1, 0]);
		const done = out[0][0].json.durable;
		const reused = (await run(beginParams(jobId, token), [{ json: { order: 1 } }]))[1][0].json.durable;
		for (const k of ['job_id', 'action', 'operation_key', 'fencing_token', 'state', 'attempt', 'remote_id', 'receipt']) {
			assert.deepEqual(done[k], reused[k], k);
		}
		assert.deepEqual([done.state, done.remote_id, done.decision], ['CONFIRMED', '55', 'recorded']);
	});

	test('unknown_and_failed_go_to_needs_attention', async () => {
		const a = await dispatched('rec-unknown');
		const timeout = { error: { message: 'timeout of 30000ms exceeded', code: 'ECONNABORTED' } };
		const out = await run(recordParams(a.key, a.token), [{ json: timeout }]);
		assert.deepEqual(sizes(out), [0, 1]);
		assert.deepEqual([out[1][0].json.durable.state, out[1][0].json.durable.reason], ['UNKNOWN', 'outcome_unknown']);

		const b = await dispatched('rec-failed');
		const invalid = { error: { message: 'Request failed with status code 422', status: 422 } };
		const failed = await run(recordParams(b.key, b.token), [{ json: invalid }]);
		assert.deepEqual(sizes(failed), [0, 1]);
		assert.deepEqual([failed[1][0].json.durable.state, failed[1][0].json.durable.reason], ['FAILED', 'failed']);
	});

	test('version_1_keeps_everything_on_the_first_output', async () => {
		const a = await dispatched('rec-v1');
		const timeout = { error: { message: 'timeout of 30000ms exceeded', code: 'ECONNABORTED' } };
		const { out } = await runNode({ items: [{ json: timeout }], credentials: creds, params: recordParams(a.key, a.token), nodeVersion: 1 });
		assert.deepEqual(sizes(out), [1, 0, 0]);
		assert.equal(out[0][0].json.durable.state, 'UNKNOWN');
	});

	/** The ledger's own record of the operation: its events, counted by the tests below. */
	async function ledgerEvents(key) {
		const res = await fetch(`${ledger.url}/v1/operations/${encodeURIComponent(key)}`, {
			headers: { Authorization: `Bearer ${RUNNER_TOKEN}` },
		});
		return (await res.json()).events;
	}
	const keptReceipts = (events) => events.filter((e) => e.detail && e.detail.receipt_kept);
	const movesTo = (events, state) => events.filter((e) => e.to_state === state && e.from_state !== state);

	test('confirm_from_another_execution_goes_to_needs_attention_not_done', async () => {
		// n8n's Retry of a crashed execution is a new execution that resumes after Begin Step.
		const jobId = uniqueJob('rec-retry');
		const token = await startJob(jobId);
		const began = await run(beginParams(jobId, token, { routeToLookUp: false }), [{ json: { order: 1 } }], { executionId: '10' });
		const key = began[0][0].json.durable.operation_key;
		const out = await run(recordParams(key, token), [{ json: { id: 'order-2' } }], { executionId: '12' });
		assert.deepEqual(sizes(out), [0, 1]);
		const d = out[1][0].json.durable;
		assert.deepEqual([d.reason, d.state, d.attempt_binding.dispatched_by, d.attempt_binding.reported_by], ['execution_mismatch', 'NEEDS_REVIEW', '10', '12']);
		assert.match(d.explanation, /another n8n execution/);
		const events = await ledgerEvents(key);
		assert.equal(movesTo(events, 'CONFIRMED').length, 0);
		assert.deepEqual(keptReceipts(events).map((e) => e.detail.receipt_kept.remote_id), ['order-2']);
	});

	test('confirm_of_the_same_execution_is_done', async () => {
		const jobId = uniqueJob('rec-same');
		const token = await startJob(jobId);
		const began = await run(beginParams(jobId, token, { routeToLookUp: false }), [{ json: { order: 1 } }], { executionId: '30' });
		const key = began[0][0].json.durable.operation_key;
		const out = await run(recordParams(key, token), [{ json: { id: 'order-1' } }], { executionId: '30' });
		assert.deepEqual(sizes(out), [1, 0]);
		assert.equal(movesTo(await ledgerEvents(key), 'CONFIRMED').length, 1);
	});

	test('a_fenced_out_confirm_of_another_execution_goes_to_needs_attention_and_the_receipt_is_kept', async () => {
		const jobId = uniqueJob('rec-stale');
		const token = await startJob(jobId);
		const began = await run(beginParams(jobId, token, { routeToLookUp: false }), [{ json: { order: 1 } }], { executionId: '20' });
		const key = began[0][0].json.durable.operation_key;
		const newer = await run({ operation: 'startJob', jobId, owner: 'exec-B', startOptions: { takeover: true } });
		assert.ok(newer[0][0].json.fencing_token > token);
		// Another execution (n8n's Retry of run 20) reports under the old token: not the attempt's own answer.
		const out = await run(recordParams(key, token), [{ json: { id: 'order-1' } }], { executionId: '21' });
		assert.deepEqual(sizes(out), [0, 1]);
		const d = out[1][0].json.durable;
		assert.deepEqual([d.reason, d.receipt_kept, d.candidate_remote_id, d.state], ['stale_fencing_token', true, 'order-1', 'SENT']);
		assert.match(d.explanation, /kept as evidence/);
		const events = await ledgerEvents(key);
		assert.equal(movesTo(events, 'CONFIRMED').length, 0);
		assert.equal(events.filter((e) => e.to_state === 'SENT').length, 1);
		// Kept on the operation as evidence (the editors' view of it), not as its outcome.
		const res = await fetch(`${ledger.url}/v1/reviews/${encodeURIComponent(key)}`, { headers: { Authorization: `Bearer ${EDITOR_TOKEN}` } });
		const kept = (await res.json()).evidence.receipts;
		assert.deepEqual(kept.map((r) => [r.standing, r.remote_id, r.execution_id]), [['stale_fencing_token', 'order-1', '21']]);
	});

	test('the_attempts_own_confirm_after_a_takeover_settles_the_step', async () => {
		const jobId = uniqueJob('rec-own');
		const token = await startJob(jobId);
		const began = await run(beginParams(jobId, token, { routeToLookUp: false }), [{ json: { order: 1 } }], { executionId: '30' });
		const key = began[0][0].json.durable.operation_key;
		await run({ operation: 'startJob', jobId, owner: 'exec-B', startOptions: { takeover: true } });
		// The execution that dispatched the attempt reports its answer: the write's answer was in hand.
		const out = await run(recordParams(key, token), [{ json: { id: 'order-1' } }], { executionId: '30' });
		assert.deepEqual(sizes(out), [1, 0]);
		assert.equal(out[0][0].json.durable.state, 'CONFIRMED');
		const events = await ledgerEvents(key);
		assert.equal(movesTo(events, 'CONFIRMED').length, 1);
	});

	test('error_item_with_continue_on_fail_is_not_done', async () => {
		const out = await run(recordParams('', 1), [{ json: { id: 1 } }], { continueOnFail: true });
		assert.deepEqual(sizes(out), [0, 1]);
		assert.match(out[1][0].json.error, /Operation Key/);
	});
});

describe('save checkpoint 1.1', () => {
	test('checkpoint_after_a_step_keeps_its_durable_fields', async () => {
		const jobId = uniqueJob('ckpt');
		const token = await startJob(jobId);
		const item = { json: { a: 1, durable: { remote_id: '9', receipt: { remote_id: '9', x: 1 }, state: 'CONFIRMED' } } };
		const params = { operation: 'saveCheckpoint', jobId, fencingToken: token, phase: 'STARTED', artifacts: {}, checkpointOptions: {} };
		const out = await run(params, [item]);
		assert.deepEqual(sizes(out), [1]);
		const d = out[0][0].json.durable;
		assert.deepEqual([d.remote_id, d.receipt.x, d.phase, d.job_id], ['9', 1, 'STARTED', jobId]);
		const v1 = (await runNode({ items: [item], credentials: creds, params: { ...params, phase: 'STARTED' }, nodeVersion: 1 })).out;
		assert.equal(v1[0][0].json.durable.remote_id, undefined);
	});
});
