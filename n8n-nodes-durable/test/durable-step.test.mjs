// Unit tests of the Durable Step node: a fake IExecuteFunctions, a REAL ledger service.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { DurableLedgerApi, DurableStep, RESUMABLE_WAIT, makeContext, runNode, workflow, runStartJob } from './fake-context.mjs';
import { RUNNER_TOKEN, startLedger } from './ledger.mjs';

let ledger;
let creds;
let seq = 0;
const uniqueJob = (name) => `${name}-${process.pid}-${++seq}`;

before(async () => {
	ledger = await startLedger();
	creds = { baseUrl: `${ledger.url}/`, token: RUNNER_TOKEN };
});
after(async () => {
	await ledger?.stop();
});

const one = (json = {}) => [{ json }];

async function startJob(jobId, { owner = 'exec-A', ...options } = {}) {
	return (await runStartJob(creds, jobId, { owner, ...options })).out[0][0].json;
}

function beginParams(jobId, token, extra = {}) {
	return {
		operation: 'beginStep',
		jobId,
		fencingToken: token,
		action: 'create_draft',
		payload: (i, item) => item.json,
		beginOptions: {},
		...extra,
	};
}

async function begin(jobId, token, items = one({ title: 'Hello' }), extra = {}) {
	return (await runNode({ items, credentials: creds, params: beginParams(jobId, token, extra) })).out;
}

async function record(items, params) {
	return (
		await runNode({
			items,
			credentials: creds,
			params: { operation: 'recordOutcome', outcome: 'auto', remoteId: (i, it) => it.json.id ?? '', receipt: (i, it) => it.json, ...params },
		})
	).out;
}

describe('credential', () => {
	test('credential_authenticates_with_bearer_and_tests_health', () => {
		const c = new DurableLedgerApi();
		assert.equal(c.name, 'durableLedgerApi');
		assert.equal(c.authenticate.properties.headers.Authorization, '=Bearer {{$credentials.token}}');
		assert.equal(c.test.request.url, '/v1/whoami');
		assert.deepEqual(c.properties.find((p) => p.name === 'token').typeOptions, { password: true });
	});
});

describe('start job', () => {
	test('start_job_creates_job_and_takes_lease', async () => {
		const jobId = uniqueJob('start');
		const { out, calls } = await runNode({
			items: [{ json: { a: 1 } }],
			credentials: creds,
			params: { operation: 'startJob', jobId, taskVersion: 1, pipeline: 'article', owner: 'exec-A', startOptions: { ttlS: 60 } },
		});
		assert.equal(out[0].length, 1);
		assert.deepEqual(out[1], []);
		const j = out[0][0].json;
		assert.equal(j.job_id, jobId);
		assert.ok(Number.isInteger(j.fencing_token) && j.fencing_token >= 1);
		assert.equal(j.phase, null);
		assert.deepEqual(j.needs_reconcile, []);
		assert.equal(j.job.pipeline, 'article');
		assert.equal(j.lease.owner, 'exec-A');
		assert.deepEqual(out[0][0].pairedItem, { item: 0 });
		assert.deepEqual(calls.map((c) => `${c.method} ${new URL(c.url).pathname}`), [`POST /v1/jobs/${jobId}/start`]);
	});

	test('start_job_lease_held_by_other_owner_is_node_api_error_unless_takeover', async () => {
		const jobId = uniqueJob('lease');
		const first = await startJob(jobId);
		await assert.rejects(startJob(jobId, { owner: 'exec-B' }), (err) => {
			assert.equal(err.name, 'NodeApiError');
			assert.match(err.message, /^lease_held: /);
			assert.equal(err.httpCode, '409');
			assert.equal(err.context.itemIndex, 0);
			return true;
		});
		const taken = await startJob(jobId, { owner: 'exec-B', startOptions: { takeover: true } });
		assert.ok(taken.fencing_token > first.fencing_token);
	});
});

describe('begin step', () => {
	test('begin_step_dispatch_goes_to_proceed_with_key_and_token', async () => {
		const jobId = uniqueJob('proceed');
		const job = await startJob(jobId);
		const out = await begin(jobId, job.fencing_token);
		assert.equal(out.length, 3);
		assert.equal(out[0].length, 1);
		assert.deepEqual([out[1].length, out[2].length], [0, 0]);
		const { json, pairedItem } = out[0][0];
		assert.equal(json.title, 'Hello', 'the input item passes through');
		assert.equal(json.durable.decision, 'dispatch');
		assert.equal(json.durable.operation_key, `acme:${jobId}:v1:create_draft`);
		assert.equal(json.durable.fencing_token, job.fencing_token);
		assert.deepEqual(pairedItem, { item: 0 });
	});

	test('begin_step_after_confirm_goes_to_already_done_with_receipt', async () => {
		const jobId = uniqueJob('done');
		const job = await startJob(jobId);
		const proceed = (await begin(jobId, job.fencing_token))[0][0].json.durable;
		const recorded = await record(one({ id: 'post-17', link: 'https://x/17' }), {
			operationKey: proceed.operation_key,
			fencingToken: proceed.fencing_token,
		});
		assert.equal(recorded[0][0].json.durable.state, 'CONFIRMED');
		assert.equal(recorded[0][0].json.durable.remote_id, 'post-17');

		const again = await begin(jobId, job.fencing_token);
		assert.equal(again[0].length, 0);
		assert.equal(again[1].length, 1);
		const d = again[1][0].json.durable;
		assert.equal(d.decision, 'reuse_receipt');
		assert.equal(d.remote_id, 'post-17');
		assert.equal(d.receipt.link, 'https://x/17');
		assert.equal(again[1][0].json.title, 'Hello');
	});

	test('begin_step_digest_mismatch_goes_to_needs_attention_not_error_shaped', async () => {
		const jobId = uniqueJob('digest');
		const job = await startJob(jobId);
		await begin(jobId, job.fencing_token, one({ title: 'one' }));
		const out = await begin(jobId, job.fencing_token, one({ title: 'two' }));
		assert.equal(out[0].length + out[1].length, 0);
		const { json } = out[2][0];
		assert.equal(json.durable.reason, 'digest_mismatch');
		assert.equal(json.durable.http_status, 422);
		assert.match(json.durable.explanation, /different payload/);
		assert.equal(json.error, undefined);
		assert.ok(Object.keys(json).some((k) => !['error', 'message', 'details'].includes(k)));
	});

	test('begin_step_with_another_action_for_a_stored_key_goes_to_needs_attention', async () => {
		const jobId = uniqueJob('action');
		const job = await startJob(jobId);
		const key = `acme:${jobId}:custom`;
		await begin(jobId, job.fencing_token, one({ title: 'one' }), { beginOptions: { operationKey: key } });
		const out = await begin(jobId, job.fencing_token, one({ title: 'one' }), {
			action: 'set_status',
			beginOptions: { operationKey: key },
		});
		assert.equal(out[0].length + out[1].length, 0);
		const { json } = out[2][0];
		assert.equal(json.durable.reason, 'action_mismatch');
		assert.equal(json.durable.http_status, 422);
		assert.match(json.durable.explanation, /another action/);
	});

	test('begin_step_stale_fencing_token_goes_to_needs_attention', async () => {
		const jobId = uniqueJob('stale');
		const job = await startJob(jobId);
		await startJob(jobId, { owner: 'exec-B', startOptions: { takeover: true } });
		const out = await begin(jobId, job.fencing_token);
		assert.equal(out[0].length, 0);
		assert.equal(out[2][0].json.durable.reason, 'stale_fencing_token');
		assert.equal(out[2][0].json.durable.http_status, 409);
		assert.match(out[2][0].json.durable.explanation, /took over/);
	});

	test('begin_step_after_timeout_outcome_unknown_goes_to_needs_attention', async () => {
		const jobId = uniqueJob('unknown');
		const job = await startJob(jobId);
		const d = (await begin(jobId, job.fencing_token))[0][0].json.durable;
		// what HTTP Request puts on its error output after a timeout
		const errItem = { json: { title: 'Hello', durable: d, error: { message: 'timeout of 1000ms exceeded', code: 'ECONNABORTED', name: 'AxiosError' } } };
		const rec = await record([errItem], { operationKey: d.operation_key, fencingToken: d.fencing_token });
		assert.equal(rec[0][0].json.durable.state, 'UNKNOWN');
		assert.equal(rec[0][0].json.durable.side_effect_error.errorKind, 'timeout');

		const restarted = await startJob(jobId);
		assert.deepEqual(restarted.needs_reconcile.map((o) => o.operation_key), [d.operation_key]);

		const again = await begin(jobId, job.fencing_token);
		assert.equal(again[0].length, 0, 'never a blind retry');
		assert.equal(again[1].length, 0);
		const na = again[2][0].json.durable;
		assert.ok(['outcome_unknown', 'needs_review'].includes(na.reason), na.reason);
		assert.ok(na.explanation.length > 20);
	});

	test('begin_step_after_validation_failure_proceeds_with_next_attempt', async () => {
		const jobId = uniqueJob('fail400');
		const job = await startJob(jobId);
		const d = (await begin(jobId, job.fencing_token))[0][0].json.durable;
		const errItem = { json: { error: { message: '400 - "bad"', status: 400 }, details: { httpCode: '400' } } };
		const rec = await record([errItem], { operationKey: d.operation_key, fencingToken: d.fencing_token });
		assert.equal(rec[0][0].json.durable.state, 'FAILED');
		const again = await begin(jobId, job.fencing_token);
		assert.equal(again[0].length, 1);
		assert.equal(again[0][0].json.durable.attempt, 2);
	});

	test('begin_step_after_403_halts_job_and_goes_to_needs_attention', async () => {
		const jobId = uniqueJob('auth');
		const job = await startJob(jobId);
		const d = (await begin(jobId, job.fencing_token))[0][0].json.durable;
		const errItem = { json: { error: { message: 'Forbidden - perhaps check your credentials?' }, details: { httpCode: '403' } } };
		const rec = await record([errItem], { operationKey: d.operation_key, fencingToken: d.fencing_token });
		assert.equal(rec[0][0].json.durable.state, 'FAILED');
		const again = await begin(jobId, job.fencing_token, one({ title: 'Hello' }), { action: 'set_seo' });
		assert.equal(again[2].length, 1);
		assert.equal(again[2][0].json.durable.decision, 'halt');
		assert.equal(again[2][0].json.durable.reason, 'authorization_revoked');
	});

	test('begin_step_routes_each_item_with_its_paired_item', async () => {
		const jobId = uniqueJob('multi');
		const job = await startJob(jobId);
		const a = (await begin(jobId, job.fencing_token, one({ n: 0 }), { action: 'a' }))[0][0].json.durable;
		await record(one({ id: 'r-a' }), { operationKey: a.operation_key, fencingToken: a.fencing_token });
		const items = [{ json: { n: 0 } }, { json: { n: 1 } }, { json: { n: 2 } }];
		const out = await begin(jobId, job.fencing_token, items, { action: (i) => ['a', 'b', 'a'][i] });
		// item 0: a done; item 1: b new; item 2: a again, other payload -> digest mismatch
		assert.deepEqual(out[1].map((x) => x.pairedItem), [{ item: 0 }]);
		assert.deepEqual(out[0].map((x) => x.pairedItem), [{ item: 1 }]);
		assert.deepEqual(out[2].map((x) => x.pairedItem), [{ item: 2 }]);
		assert.equal(out[2][0].json.durable.reason, 'digest_mismatch');
	});
});

describe('begin step batch', () => {
	const paths = (calls) => calls.map((c) => `${c.method} ${new URL(c.url).pathname}`);
	// the durable object without the job's own id (the two runs use two jobs)
	const durableOf = (json) => JSON.parse(JSON.stringify(json.durable).replaceAll(json.durable.job_id, '<job>'));

	// item 0: action a, confirmed earlier with this payload -> Already Done
	// item 1: action b, new -> Proceed
	// item 2: action a again with another payload -> digest_mismatch -> Needs Attention
	async function arrange() {
		const jobId = uniqueJob('batch');
		const job = await startJob(jobId);
		const a = (await begin(jobId, job.fencing_token, one({ n: 0 }), { action: 'a' }))[0][0].json.durable;
		await record(one({ id: 'r-a' }), { operationKey: a.operation_key, fencingToken: a.fencing_token });
		return { jobId, job };
	}
	const items = () => [{ json: { n: 0 } }, { json: { n: 1 } }, { json: { n: 2 } }];
	const action = (i) => ['a', 'b', 'a'][i];

	test('begin_step_three_items_make_one_batch_request_and_route_each_item', async () => {
		const { jobId, job } = await arrange();
		const { out, calls } = await runNode({ items: items(), credentials: creds, params: beginParams(jobId, job.fencing_token, { action }) });
		assert.deepEqual(paths(calls), ['POST /v1/operations/batch'], 'one request for three items');
		assert.equal(calls[0].body.begin.length, 3);
		assert.deepEqual(calls[0].body.begin.map((b) => b.action), ['a', 'b', 'a']);
		assert.deepEqual(out[0].map((x) => x.pairedItem), [{ item: 1 }]);
		assert.deepEqual(out[1].map((x) => x.pairedItem), [{ item: 0 }]);
		assert.deepEqual(out[2].map((x) => x.pairedItem), [{ item: 2 }]);
		assert.deepEqual(out.map((o) => o.map((x) => x.json.n)), [[1], [0], [2]], 'input fields pass through');
		assert.equal(out[0][0].json.durable.decision, 'dispatch');
		assert.equal(out[0][0].json.durable.operation_key, `acme:${jobId}:v1:b`);
		assert.equal(out[1][0].json.durable.decision, 'reuse_receipt');
		assert.equal(out[1][0].json.durable.remote_id, 'r-a');
		const na = out[2][0].json;
		assert.equal(na.durable.reason, 'digest_mismatch');
		assert.equal(na.durable.http_status, 422, 'the status the single route answers');
		assert.match(na.durable.explanation, /different payload/);
		assert.equal(na.error, undefined);
	});

	test('begin_step_batch_outputs_equal_one_begin_per_item', async () => {
		const batched = await arrange();
		const { out: viaBatch } = await runNode({ items: items(), credentials: creds, params: beginParams(batched.jobId, batched.job.fencing_token, { action }) });
		const single = await arrange();
		const viaSingle = [[], [], []];
		for (const [i, item] of items().entries()) {
			const { out, calls } = await runNode({ items: [item], credentials: creds, params: beginParams(single.jobId, single.job.fencing_token, { action: action(i) }) });
			assert.deepEqual(paths(calls), ['POST /v1/operations/begin'], 'one item keeps the single route');
			out.forEach((o, k) => viaSingle[k].push(...o));
		}
		assert.deepEqual(viaBatch.map((o) => o.map((x) => durableOf(x.json))), viaSingle.map((o) => o.map((x) => durableOf(x.json))));
	});

	test('begin_step_batch_stale_token_items_go_to_needs_attention', async () => {
		const jobId = uniqueJob('batch-stale');
		const job = await startJob(jobId);
		await startJob(jobId, { owner: 'exec-B', startOptions: { takeover: true } });
		const { out, calls } = await runNode({ items: items(), credentials: creds, params: beginParams(jobId, job.fencing_token, { action: (i) => `s${i}` }) });
		assert.equal(calls.length, 1);
		assert.equal(out[0].length + out[1].length, 0);
		assert.deepEqual(out[2].map((x) => [x.pairedItem.item, x.json.durable.reason, x.json.durable.http_status]), [
			[0, 'stale_fencing_token', 409],
			[1, 'stale_fencing_token', 409],
			[2, 'stale_fencing_token', 409],
		]);
	});

	test('begin_step_batch_item_refusal_is_that_items_node_api_error', async () => {
		const jobId = uniqueJob('batch-404');
		const job = await startJob(jobId);
		const params = beginParams(jobId, job.fencing_token, { jobId: (i) => (i === 1 ? `${jobId}-missing` : jobId), action: (i) => `m${i}` });
		await assert.rejects(runNode({ items: items(), credentials: creds, params }), (err) => {
			assert.equal(err.name, 'NodeApiError');
			assert.match(err.message, /^job_not_found: /);
			assert.equal(err.httpCode, '404');
			assert.equal(err.context.itemIndex, 1);
			return true;
		});
		// other actions: the first run began items 0 and 2 of these (the node failed after that)
		const params2 = { ...params, action: (i) => `n${i}` };
		const { out, calls } = await runNode({ items: items(), credentials: creds, params: params2, continueOnFail: true });
		assert.equal(calls.length, 1);
		assert.deepEqual(out[0].map((x) => x.pairedItem.item), [0, 2]);
		assert.deepEqual(out[2].map((x) => x.pairedItem.item), [1]);
		assert.match(out[2][0].json.error, /^job_not_found: /);
		assert.ok(Object.keys(out[2][0].json).every((k) => ['error', 'message', 'details'].includes(k)));
	});

	test('begin_step_batch_bad_parameters_are_checked_before_the_request', async () => {
		const jobId = uniqueJob('batch-params');
		const job = await startJob(jobId);
		const params = beginParams(jobId, job.fencing_token, { action: (i) => (i === 1 ? '' : `p${i}`) });
		const { ctx, calls } = makeContext({ items: items(), credentials: creds, params });
		await assert.rejects(new DurableStep().execute.call(ctx), (err) => {
			assert.ok(err instanceof workflow.NodeOperationError);
			assert.equal(err.context.itemIndex, 1);
			assert.match(err.description, /Action/);
			return true;
		});
		assert.equal(calls.length, 0, 'nothing is begun when the node fails on a bad item');
		const { out, calls: calls2 } = await runNode({ items: items(), credentials: creds, params, continueOnFail: true });
		assert.deepEqual(paths(calls2), ['POST /v1/operations/batch']);
		assert.equal(calls2[0].body.begin.length, 2);
		assert.deepEqual(out[0].map((x) => x.pairedItem.item), [0, 2]);
		assert.deepEqual(out[2].map((x) => x.pairedItem.item), [1]);
		assert.match(out[2][0].json.error, /Action/);
	});

	test('begin_step_batch_rejected_as_a_whole_falls_back_to_one_begin_per_item', async () => {
		const jobId = uniqueJob('batch-422');
		const job = await startJob(jobId);
		// a 300-character action fails the ledger's schema: the whole batch is refused with 422
		const params = beginParams(jobId, job.fencing_token, { action: (i) => (i === 1 ? 'x'.repeat(300) : `f${i}`) });
		const { out, calls } = await runNode({ items: items(), credentials: creds, params, continueOnFail: true });
		assert.deepEqual(paths(calls), ['POST /v1/operations/batch', ...Array(3).fill('POST /v1/operations/begin')]);
		assert.deepEqual(out[0].map((x) => x.pairedItem.item), [0, 2], 'a malformed item does not block the others');
		assert.deepEqual(out[2].map((x) => x.pairedItem.item), [1]);
		assert.match(out[2][0].json.error, /^validation_error: /);
	});

	test('begin_step_batch_failure_fails_every_item_like_the_single_route', async () => {
		const params = beginParams('x', 1, { action: (i) => `u${i}` });
		const down = { baseUrl: 'http://127.0.0.1:9', token: 't' };
		await assert.rejects(runNode({ items: items(), credentials: down, params }), (err) => {
			assert.equal(err.name, 'NodeApiError');
			assert.match(err.message, /^ledger_unreachable: /);
			assert.equal(err.context.itemIndex, 0);
			return true;
		});
		const { out } = await runNode({ items: items(), credentials: down, params, continueOnFail: true });
		assert.equal(out[0].length, 0);
		assert.deepEqual(out[2].map((x) => x.pairedItem.item), [0, 1, 2]);
		assert.ok(out[2].every((x) => /^ledger_unreachable: /.test(x.json.error)));
		await assert.rejects(
			runNode({ items: items(), credentials: { ...creds, token: 'wrong' }, params }),
			(err) => err.name === 'NodeApiError' && /^unauthorized: /.test(err.message) && err.httpCode === '401' && err.context.itemIndex === 0,
		);
	});

	test('begin_step_batch_reconcile_items_use_the_single_follow_up_calls', async () => {
		const jobId = uniqueJob('batch-unknown');
		const job = await startJob(jobId);
		const d = (await begin(jobId, job.fencing_token, one({ n: 0 }), { action: 'r0' }))[0][0].json.durable;
		await record(one(), { operationKey: d.operation_key, fencingToken: d.fencing_token, outcome: 'unknown', errorMessage: 'lost' });
		const { out, calls } = await runNode({ items: items(), credentials: creds, params: beginParams(jobId, job.fencing_token, { action: (i) => `r${i}` }) });
		assert.equal(paths(calls)[0], 'POST /v1/operations/batch');
		assert.equal(calls.filter((c) => c.url.endsWith('/v1/operations/batch')).length, 1);
		assert.ok(paths(calls).slice(1).every((p) => !p.endsWith('/batch')), 'follow-ups go item by item');
		assert.deepEqual(out[0].map((x) => x.pairedItem.item), [1, 2]);
		assert.deepEqual(out[2].map((x) => x.pairedItem.item), [0], 'never a blind retry');
		assert.ok(['outcome_unknown', 'needs_review'].includes(out[2][0].json.durable.reason));
	});

	test('begin_step_batch_sends_at_most_100_items_per_request', async () => {
		const jobId = uniqueJob('batch-chunks');
		const job = await startJob(jobId);
		const many = Array.from({ length: 101 }, (_, n) => ({ json: { n } }));
		const { out, calls } = await runNode({ items: many, credentials: creds, params: beginParams(jobId, job.fencing_token, { action: (i) => `c${i}` }) });
		assert.deepEqual(calls.map((c) => c.body.begin.length), [100, 1]);
		assert.equal(out[0].length, 101);
		assert.deepEqual(out[0].map((x) => x.pairedItem.item), many.map((_, n) => n));
	});
});

describe('record outcome', () => {
	test('record_outcome_explicit_fail_and_unknown', async () => {
		const jobId = uniqueJob('explicit');
		const job = await startJob(jobId);
		const a = (await begin(jobId, job.fencing_token, one(), { action: 'a' }))[0][0].json.durable;
		const f = await record(one(), { operationKey: a.operation_key, fencingToken: a.fencing_token, outcome: 'fail', retryable: false, errorMessage: 'no' });
		assert.equal(f[0][0].json.durable.state, 'FAILED');
		const b = (await begin(jobId, job.fencing_token, one(), { action: 'b' }))[0][0].json.durable;
		const u = await record(one(), { operationKey: b.operation_key, fencingToken: b.fencing_token, outcome: 'unknown', errorMessage: 'lost' });
		assert.equal(u[0][0].json.durable.state, 'UNKNOWN');
		const again = await begin(jobId, job.fencing_token, one(), { action: 'a' });
		assert.equal(again[2][0].json.durable.decision, 'halt', 'not retryable -> halt');
	});

	test('record_outcome_confirm_without_remote_id_is_node_operation_error', async () => {
		const jobId = uniqueJob('noid');
		const job = await startJob(jobId);
		const d = (await begin(jobId, job.fencing_token))[0][0].json.durable;
		await assert.rejects(record(one({ ok: true }), { operationKey: d.operation_key, fencingToken: d.fencing_token }), (err) => {
			assert.ok(err instanceof workflow.NodeOperationError);
			assert.match(err.message, /Remote ID/);
			assert.equal(err.context.itemIndex, 0);
			return true;
		});
	});

	test('record_outcome_connection_refused_is_retryable_failure', async () => {
		const jobId = uniqueJob('refused');
		const job = await startJob(jobId);
		const d = (await begin(jobId, job.fencing_token))[0][0].json.durable;
		const errItem = { json: { error: { message: 'connect ECONNREFUSED 127.0.0.1:9', code: 'ECONNREFUSED' } } };
		const rec = await record([errItem], { operationKey: d.operation_key, fencingToken: d.fencing_token });
		assert.equal(rec[0][0].json.durable.state, 'FAILED');
		assert.equal((await begin(jobId, job.fencing_token))[0].length, 1);
	});

	test('record_outcome_fenced_out_answer_of_its_own_attempt_settles_it', async () => {
		// Issue 37: the attempt's own receipt, reported after a takeover, is its outcome (no review).
		const jobId = uniqueJob('stale-confirm');
		const job = await startJob(jobId);
		const d = (await begin(jobId, job.fencing_token))[0][0].json.durable;
		const b = await startJob(jobId, { owner: 'exec-B', startOptions: { takeover: true } });
		await record(one({ id: 'x' }), { operationKey: d.operation_key, fencingToken: d.fencing_token });
		const again = await begin(jobId, b.fencing_token);
		assert.equal(again[1][0].json.durable.remote_id, 'x');
	});
});

describe('checkpoint and reconcile', () => {
	test('save_checkpoint_saves_phase_and_refuses_skips', async () => {
		const jobId = uniqueJob('ckpt');
		const job = await startJob(jobId, { pipeline: 'article' });
		const params = {
			operation: 'saveCheckpoint',
			jobId,
			fencingToken: job.fencing_token,
			phase: 'SOURCES_COLLECTED',
			artifacts: { artifact: [{ role: 'sources', uri: 'file:///tmp/s.json', sha256: 'a'.repeat(64) }] },
			checkpointOptions: { remote: '{"post_id": 1}', nextAllowedActions: 'generate_body, qa' },
		};
		const { out } = await runNode({ items: one({ keep: true }), credentials: creds, params });
		assert.equal(out[0][0].json.keep, true);
		assert.equal(out[0][0].json.durable.job.phase, 'SOURCES_COLLECTED');
		await assert.rejects(runNode({ items: one(), credentials: creds, params: { ...params, phase: 'PUBLISHED' } }), (err) => {
			assert.equal(err.name, 'NodeApiError');
			assert.match(err.message, /^phase_skipped: /);
			return true;
		});
		await assert.rejects(
			runNode({ items: one(), credentials: creds, params: { ...params, phase: 'BODY_GENERATED', checkpointOptions: { remote: '{"api_key": "sk-abc"}' } } }),
			/secret_in_checkpoint/,
		);
	});

	test('reconcile_operation_returns_its_state', async () => {
		const jobId = uniqueJob('rec');
		const job = await startJob(jobId);
		const d = (await begin(jobId, job.fencing_token))[0][0].json.durable;
		const { out } = await runNode({ items: one(), credentials: creds, params: { operation: 'reconcile', operationKey: d.operation_key } });
		assert.equal(out[0][0].json.operation_key, d.operation_key);
		assert.ok(typeof out[0][0].json.state === 'string');
	});
});

describe('wait for approval', () => {
	const RESUME = 'http://127.0.0.1:5678/webhook-waiting/77?signature=tok-77';

	async function halted(jobId) {
		const job = await startJob(jobId);
		const out = await begin(jobId, job.fencing_token, one({ post_id: 7 }), {
			action: 'publish',
			beginOptions: { requiresApproval: true, target: 'wordpress:default' },
		});
		assert.equal(out[2].length, 1);
		return out[2][0];
	}

	const waitParams = (extra = {}) => ({
		operation: 'waitForApproval',
		operationKey: (i, item) => item.json.durable.operation_key,
		fencingToken: (i, item) => item.json.durable.fencing_token,
		resumeUrl: RESUME,
		...extra,
	});

	test('wait_for_approval_registers_the_resume_url_and_passes_the_item_through', async () => {
		const item = await halted(uniqueJob('wait'));
		assert.equal(item.json.durable.reason, 'approval_required');
		const { out, calls } = await runNode({
			items: [{ json: item.json }],
			credentials: creds,
			executionId: '77',
			workflowId: 'wfArticle',
			params: waitParams(),
		});
		assert.equal(out[0].length, 1);
		assert.deepEqual(out[1], []);
		assert.deepEqual(out[2], []);
		const j = out[0][0].json;
		assert.equal(j.post_id, 7); // passed through
		assert.equal(j.durable.reason, 'approval_required');
		assert.equal(j.durable.waiting_for, 'approval');
		assert.equal(j.durable.decision, null);
		assert.equal(j.durable.wait.execution_id, '77');
		assert.equal(j.durable.wait.workflow_id, 'wfArticle');
		assert.ok(!JSON.stringify(j).includes('tok-77'), 'the resume token is never echoed');
		assert.equal(calls.length, 1);
		assert.match(calls[0].url, /\/v1\/operations\/[^/]+\/wait$/);
		assert.equal(calls[0].body.resume_url, RESUME);
		assert.equal(calls[0].headers['X-N8N-Execution-Id'], '77');
		assert.equal(calls[0].headers['X-N8N-Workflow-Id'], 'wfArticle');
	});

	test('every_ledger_call_carries_the_execution_and_the_ledger_records_it', async () => {
		const jobId = uniqueJob('prov');
		const { ctx, calls } = makeContext({
			items: one(),
			credentials: creds,
			executionId: '901',
			workflowId: 'wfProv',
			params: { operation: 'startJob', jobId, taskVersion: 1, pipeline: 'generic', owner: 'exec-P', startOptions: {} },
		});
		const job = (await new DurableStep().execute.call(ctx))[0][0].json;
		assert.ok(calls.every((c) => c.headers['X-N8N-Execution-Id'] === '901' && c.headers['X-N8N-Workflow-Id'] === 'wfProv'));
		const { out } = await runNode({ items: one({ a: 1 }), credentials: creds, executionId: '902', workflowId: 'wfProv', params: beginParams(jobId, job.fencing_token) });
		const key = out[0][0].json.durable.operation_key;
		const res = await fetch(`${ledger.url}/v1/operations/${encodeURIComponent(key)}`, { headers: { Authorization: `Bearer ${RUNNER_TOKEN}` } });
		const { events } = await res.json();
		assert.deepEqual(events[0].detail.n8n, { execution_id: '902', workflow_id: 'wfProv' });
	});

	test('wait_for_approval_refuses_other_reasons_and_a_missing_resumable_wait_node', async () => {
		const item = await halted(uniqueJob('wait-bad'));
		const explanation = 'An approver denied this exact payload; nothing was done. (denied by approver-1: too long)';
		const denied = { json: { ...item.json, durable: { ...item.json.durable, reason: 'approval_denied', explanation } } };
		await assert.rejects(runNode({ items: [denied], credentials: creds, params: waitParams() }), (err) => {
			assert.ok(err instanceof workflow.NodeOperationError);
			assert.equal(err.message, `approval_denied: ${explanation}`, 'the reason and the approver\'s why, as Needs Attention fails');
			assert.match(err.description, /If node/);
			return true;
		});
		await assert.rejects(runNode({ items: [item], credentials: creds, childNodes: [], params: waitParams() }), (err) => {
			assert.ok(err instanceof workflow.NodeOperationError);
			assert.match(err.description, /Resume: On Webhook Call with HTTP Method POST/);
			return true;
		});
		const getWait = { ...RESUMABLE_WAIT, parameters: { resume: 'webhook' } }; // HTTP Method defaults to GET
		await assert.rejects(
			runNode({ items: [item], credentials: creds, childNodes: [getWait], params: waitParams() }),
			(err) => err instanceof workflow.NodeOperationError && /"Wait"/.test(err.description) && /POST/.test(err.description),
		);
		await assert.rejects(
			runNode({ items: [item], credentials: creds, params: waitParams({ resumeUrl: 'ftp://x/y' }) }),
			(err) => err instanceof workflow.NodeOperationError && /http\(s\)/.test(err.message),
		);
		// The ledger's own refusals: a stale token (409), a host off the allow-list (422).
		await assert.rejects(
			runNode({ items: [item], credentials: creds, params: waitParams({ fencingToken: 0 }) }),
			(err) => err.name === 'NodeApiError' && err.httpCode === '409',
		);
		await assert.rejects(
			runNode({ items: [item], credentials: creds, params: waitParams({ resumeUrl: 'http://169.254.169.254/x' }) }),
			(err) => err.name === 'NodeApiError' && err.httpCode === '422' && /DURABLE_N8N_RESUME_HOSTS/.test(err.message),
		);
	});
});

describe('errors', () => {
	test('bad_parameters_are_node_operation_errors_with_item_index', async () => {
		const jobId = uniqueJob('params');
		const job = await startJob(jobId);
		const items = [{ json: {} }, { json: {} }];
		await assert.rejects(begin(jobId, job.fencing_token, items, { action: (i) => (i === 1 ? '' : 'x') }), (err) => {
			assert.ok(err instanceof workflow.NodeOperationError);
			assert.equal(err.context.itemIndex, 1);
			assert.match(err.description, /Action/);
			return true;
		});
		await assert.rejects(begin(jobId, 'abc'), (err) => {
			assert.ok(err instanceof workflow.NodeOperationError);
			assert.match(err.message, /Fencing Token/);
			return true;
		});
		await assert.rejects(
			begin(jobId, () => {
				throw new Error("Referenced node doesn't exist");
			}),
			(err) => err instanceof workflow.NodeOperationError && /Start Job/.test(err.description),
		);
		await assert.rejects(begin(jobId, job.fencing_token, one(), { payload: '{not json' }), /not valid JSON/);
	});

	test('ledger_refusals_and_outages_are_node_api_errors', async () => {
		await assert.rejects(
			runNode({ items: one(), credentials: { ...creds, token: 'wrong' }, params: { operation: 'startJob', jobId: 'x', owner: 'o', startOptions: {} } }),
			(err) => err.name === 'NodeApiError' && /^unauthorized: /.test(err.message) && err.httpCode === '401',
		);
		await assert.rejects(
			runNode({ items: one(), credentials: { baseUrl: 'http://127.0.0.1:9', token: 't' }, params: { operation: 'startJob', jobId: 'x', owner: 'o', startOptions: {} } }),
			(err) => err.name === 'NodeApiError' && /^ledger_unreachable: /.test(err.message),
		);
	});

	test('continue_on_fail_keeps_going_and_never_routes_errors_to_proceed', async () => {
		const jobId = uniqueJob('cof');
		const job = await startJob(jobId);
		const items = [{ json: { n: 0 } }, { json: { n: 1 } }, { json: { n: 2 } }];
		const { out } = await runNode({
			items,
			credentials: creds,
			continueOnFail: true,
			params: beginParams(jobId, job.fencing_token, { action: (i) => (i === 1 ? '' : `act${i}`) }),
		});
		assert.deepEqual(out[0].map((x) => x.pairedItem.item), [0, 2]);
		assert.equal(out[2].length, 1);
		assert.deepEqual(out[2][0].pairedItem, { item: 1 });
		assert.match(out[2][0].json.error, /Action/);
		// shaped like an n8n error item, so "Continue (using error output)" moves it there
		assert.ok(Object.keys(out[2][0].json).every((k) => ['error', 'message', 'details'].includes(k)));
	});
});
