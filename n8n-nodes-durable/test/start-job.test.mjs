// Start Job as n8n runs it (issue 24, traps 1 and 3), against a REAL ledger: a new execution takes
// the lease of the one before it without an option (node 1.2), still fenced; Task Version starts
// a higher version of the job and refuses a lower one; lease_held names the option and an ISO time.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { runNode, runStartJob } from './fake-context.mjs';
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

const path = (c) => `${c.method} ${new URL(c.url).pathname}`;

async function startJob(jobId, { version = 1.2, execution = '1', taskVersion = 1, startOptions = {} } = {}) {
	const { out, calls } = await runStartJob(creds, jobId, { version, execution, taskVersion, startOptions });
	return { json: out[0][0].json, calls };
}

async function begin(jobId, token, payload = { title: 'Hello' }) {
	const { out } = await runNode({
		items: [{ json: payload }],
		credentials: creds,
		nodeVersion: 1.1,
		params: { operation: 'beginStep', jobId, fencingToken: token, action: 'send', payload: (i, it) => it.json, beginOptions: {} },
	});
	return out;
}

describe('start job lease (node 1.2)', () => {
	test('start_job_new_execution_runs_right_after_the_last_one_without_an_option', async () => {
		const jobId = uniqueJob('rerun');
		const first = await startJob(jobId, { execution: '10' });
		const second = await startJob(jobId, { execution: '11' });
		assert.equal(second.json.fencing_token, first.json.fencing_token + 1);
		assert.equal(second.json.lease.owner, 'n8n-exec-11');
		assert.deepEqual(second.calls.find((c) => c.url.endsWith('/start')).body.takeover, true);
		// still fenced: the first execution's token is refused from now on
		const stale = await begin(jobId, first.json.fencing_token);
		assert.deepEqual([stale[0].length, stale[2][0].json.durable.reason], [0, 'stale_fencing_token']);
		const out = await begin(jobId, second.json.fencing_token);
		assert.equal(out[0].length, 1);
	});

	test('start_job_take_over_added_and_off_refuses_with_the_option_and_an_iso_expiry', async () => {
		const jobId = uniqueJob('held');
		await startJob(jobId, { execution: '20' });
		await assert.rejects(startJob(jobId, { execution: '21', startOptions: { takeover: false } }), (err) => {
			assert.equal(err.name, 'NodeApiError');
			assert.match(err.message, /^lease_held: .*until \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z .*Take Over/);
			return true;
		});
	});

	test('start_job_versions_1_1_still_wait_for_a_live_lease', async () => {
		const jobId = uniqueJob('old');
		await startJob(jobId, { version: 1.1, execution: '30' });
		await assert.rejects(startJob(jobId, { version: 1.1, execution: '31' }), /lease_held: .*Take Over/);
	});
});

describe('start job task version', () => {
	test('start_job_higher_task_version_starts_that_version', async () => {
		const jobId = uniqueJob('bump');
		const first = await startJob(jobId, { execution: '40' });
		const v1 = await begin(jobId, first.json.fencing_token);
		assert.equal(v1[0][0].json.durable.operation_key, `acme:${jobId}:v1:send`);
		const second = await startJob(jobId, { execution: '41', taskVersion: 3 });
		assert.equal(second.json.task_version, 3);
		assert.equal(second.json.job.task_version, 3);
		assert.deepEqual(second.calls.map(path), [`POST /v1/jobs/${jobId}/start`]);
		assert.equal(second.calls[0].body.task_version, 3);
		// the same step of the new version is a new operation, dispatched again (another payload is fine)
		const v3 = await begin(jobId, second.json.fencing_token, { title: 'Hello again' });
		assert.equal(v3[0][0].json.durable.operation_key, `acme:${jobId}:v3:send`);
		// the same Task Version on the next run changes nothing
		const third = await startJob(jobId, { execution: '42', taskVersion: 3 });
		assert.equal(third.json.task_version, 3);
		assert.equal(third.calls.length, 1);
	});

	test('start_job_lower_task_version_is_refused_before_the_lease', async () => {
		const jobId = uniqueJob('lower');
		await startJob(jobId, { execution: '50', taskVersion: 2 });
		const { makeContext } = await import('./fake-context.mjs');
		const { ctx, calls } = makeContext({
			items: [{ json: {} }],
			credentials: creds,
			nodeVersion: 1.2,
			executionId: '51',
			params: { operation: 'startJob', jobId, taskVersion: 1, pipeline: 'generic', owner: 'n8n-exec-51', startOptions: {} },
		});
		const { DurableStep } = await import('./fake-context.mjs');
		await assert.rejects(new DurableStep().execute.call(ctx), (err) => {
			assert.equal(err.name, 'NodeOperationError');
			assert.match(err.message, /^task_version_lower: Task Version 1 is lower than job .*'s task version 2/);
			assert.match(err.description, /Set Task Version to 2/);
			return true;
		});
		assert.deepEqual(calls.map(path), [`POST /v1/jobs/${jobId}/start`]);
	});

	test('start_job_lower_task_version_on_1_1_is_noted_not_silent', async () => {
		const jobId = uniqueJob('lower-old');
		await startJob(jobId, { version: 1.1, execution: '60', taskVersion: 2 });
		const again = await startJob(jobId, { version: 1.1, execution: '61', taskVersion: 1, startOptions: { takeover: true } });
		assert.equal(again.json.task_version, 2);
		assert.match(again.json.task_version_note, /Task Version 1 is lower than the job's task version 2/);
	});
});

// A ledger older than POST /v1/jobs/{id}/start answers it 404 not_found (no such route), as Flask
// does for a path it does not know; everything else goes to the real ledger.
function olderLedger(ctx, calls) {
	const send = ctx.helpers.httpRequestWithAuthentication;
	ctx.helpers.httpRequestWithAuthentication = async function (name, options, additional) {
		if (new URL(options.url).pathname.endsWith('/start')) {
			calls.push({ method: options.method, url: options.url, body: options.body });
			return { statusCode: 404, body: { error: { code: 'not_found', message: 'Not Found', details: {} } } };
		}
		return send.call(this, name, options, additional);
	};
	return ctx;
}

async function startOn(ledgerKind, jobId, { items = 1, execution = '1', taskVersion = 1, version = 1.2 } = {}) {
	const { makeContext, DurableStep } = await import('./fake-context.mjs');
	const made = makeContext({
		items: Array.from({ length: items }, () => ({ json: {} })),
		credentials: creds,
		nodeVersion: version,
		executionId: execution,
		params: {
			operation: 'startJob',
			jobId: (i) => (items > 1 ? `${jobId}-${i}` : jobId),
			taskVersion,
			pipeline: 'generic',
			owner: `n8n-exec-${execution}`,
			startOptions: { budgets: '{"max_attempts": 3}' },
		},
	});
	if (ledgerKind === 'older') olderLedger(made.ctx, made.calls);
	const out = await new DurableStep().execute.call(made.ctx);
	return { items: out[0].map((o) => o.json), calls: made.calls.map(path), reads: made.credentialReads.count };
}

// What differs between two jobs started the same way: their ids and times.
function shape(json) {
	const at = (o) => ({ ...o, expires_at: '<t>' });
	const job = { ...json.job, job_id: '<id>', created_at: '<t>', updated_at: '<t>', lease: at(json.job.lease) };
	return { ...json, job_id: '<id>', lease: at(json.lease), job };
}

describe('start job in one ledger call', () => {
	test('start_job_item_is_the_same_from_one_call_and_from_the_three_calls', async () => {
		const runs = {};
		for (const kind of ['current', 'older']) {
			const jobId = uniqueJob(`same-${kind}`);
			const first = await startOn(kind, jobId, { execution: '70' });
			const again = await startOn(kind, jobId, { execution: '71', taskVersion: 2 });
			runs[kind] = { first, again };
		}
		assert.deepEqual(runs.current.first.calls.map((c) => c.replace(/\/v1\/jobs\/[^/]+/, '')), ['POST /start']);
		assert.deepEqual(runs.older.again.calls.map((c) => c.replace(/\/v1\/jobs\/[^/]+/, '')), [
			'POST /start',
			'PUT ',
			'POST /lease',
			'POST /versions',
		]);
		assert.deepEqual(shape(runs.current.first.items[0]), shape(runs.older.first.items[0]));
		assert.deepEqual(shape(runs.current.again.items[0]), shape(runs.older.again.items[0]));
		assert.deepEqual([runs.current.again.items[0].task_version, runs.current.again.items[0].fencing_token], [2, 2]);
	});

	test('start_job_on_an_older_ledger_asks_for_the_route_once_per_execution', async () => {
		const { items, calls } = await startOn('older', uniqueJob('older-batch'), { items: 3, execution: '80' });
		assert.equal(items.length, 3);
		assert.equal(calls.filter((c) => c.endsWith('/start')).length, 1);
		assert.equal(calls.filter((c) => c.endsWith('/lease')).length, 3);
	});

	test('the_nodes_of_one_execution_share_one_read_of_the_same_credential', async () => {
		const { runNode } = await import('./fake-context.mjs');
		const reads = { count: 0 };
		const node = (execution, credentialId, jobId) =>
			runNode({
				items: [{ json: {} }],
				credentials: creds,
				nodeVersion: 1.5,
				executionId: execution,
				credentialId,
				credentialReads: reads,
				params: { operation: 'startJob', jobId, taskVersion: 1, pipeline: 'generic', owner: `n8n-exec-${execution}`, startOptions: {} },
			});
		await node('shared-1', 'cred-a', uniqueJob('shared-a'));
		await node('shared-1', 'cred-a', uniqueJob('shared-b')); // the next node of the same execution
		assert.equal(reads.count, 1);
		await node('shared-2', 'cred-a', uniqueJob('shared-c')); // another execution reads again
		await node('shared-2', 'cred-b', uniqueJob('shared-d')); // another credential too
		assert.equal(reads.count, 3);
		await node('shared-3', undefined, uniqueJob('shared-e')); // no credential id known: per node
		await node('shared-3', undefined, uniqueJob('shared-f'));
		assert.equal(reads.count, 5);
	});

	test('start_job_reads_the_ledger_credential_once_per_execution', async () => {
		const { items, calls, reads } = await startOn('current', uniqueJob('reads'), { items: 3, execution: '90' });
		assert.deepEqual([items.length, calls.length, reads], [3, 3, 1]);
	});

	test('start_job_lower_task_version_on_1_1_goes_on_at_the_job_version_in_one_call', async () => {
		const jobId = uniqueJob('lower-one');
		await startOn('current', jobId, { version: 1.1, execution: '95', taskVersion: 2 });
		const { makeContext, DurableStep } = await import('./fake-context.mjs');
		const { ctx, calls } = makeContext({
			items: [{ json: {} }],
			credentials: creds,
			nodeVersion: 1.1,
			executionId: '96',
			params: { operation: 'startJob', jobId, taskVersion: 1, pipeline: 'generic', owner: 'n8n-exec-96', startOptions: { takeover: true } },
		});
		const out = await new DurableStep().execute.call(ctx);
		assert.deepEqual(calls.map(path), [`POST /v1/jobs/${jobId}/start`]);
		assert.equal(calls[0].body.if_lower, 'keep');
		assert.equal(out[0][0].json.task_version, 2);
		assert.match(out[0][0].json.task_version_note, /Task Version 1 is lower than the job's task version 2/);
	});

	test('start_job_with_a_session_keeps_the_three_calls', async () => {
		const jobId = uniqueJob('session');
		const { makeContext, DurableStep } = await import('./fake-context.mjs');
		const { ctx, calls } = makeContext({
			items: [{ json: {} }],
			credentials: creds,
			nodeVersion: 1.2,
			params: { operation: 'startJob', jobId, taskVersion: 1, pipeline: 'generic', owner: 'x', startOptions: { sessionId: 'sess_none' } },
		});
		// the session does not exist: the PUT that would bind it is refused, and no /start was tried
		await assert.rejects(new DurableStep().execute.call(ctx), /session|agent/i);
		assert.deepEqual(calls.map(path), [`PUT /v1/jobs/${jobId}`]);
	});
});

describe('start job liveness (node 1.4, issue 37)', () => {
	const renew = (jobId, owner, token, liveS) =>
		fetch(`${ledger.url}/v1/jobs/${encodeURIComponent(jobId)}/lease/renew`, {
			method: 'POST',
			headers: { Authorization: `Bearer ${RUNNER_TOKEN}`, 'Content-Type': 'application/json' },
			body: JSON.stringify({ owner, fencing_token: token, live_s: liveS }),
		});

	test('start_job_waits_for_a_live_holder_then_takes_over_once_it_is_idle', async () => {
		const jobId = uniqueJob('live');
		const first = await startJob(jobId, { version: 1.4, execution: '40' });
		assert.equal(first.json.job.lease.holder_working ?? true, true);
		const started = Date.now();
		// the holder finishes its step 1.2 s later: idle from then on
		const idle = (async () => {
			await new Promise((r) => setTimeout(r, 1200));
			await renew(jobId, 'n8n-exec-40', first.json.fencing_token, 0);
		})();
		const second = await startJob(jobId, { version: 1.4, execution: '41' });
		await idle;
		const waited = Date.now() - started;
		assert.ok(waited >= 1200 && waited < 5000, `waited ${waited} ms`);
		assert.equal(second.json.fencing_token, first.json.fencing_token + 1);
		assert.ok(second.json.waited_for_holder_s >= 1);
		const body = second.calls.find((c) => c.url.endsWith('/start')).body;
		assert.deepEqual([body.if_live, body.live_s, body.takeover], ['wait', 10, true]);
	});

	test('start_job_past_the_wait_stops_with_running_elsewhere_and_writes_nothing', async () => {
		const jobId = uniqueJob('elsewhere');
		const first = await startJob(jobId, { version: 1.4, execution: '50' });
		await assert.rejects(
			startJob(jobId, { version: 1.4, execution: '51', startOptions: { waitForHolderS: 1 } }),
			/running_elsewhere: job .* is being worked on by n8n-exec-50/,
		);
		// the holder was not fenced out: its token still begins
		const out = await begin(jobId, first.json.fencing_token);
		assert.equal(out[0].length, 1);
	});

	test('start_job_1_3_still_takes_over_a_live_holder', async () => {
		const jobId = uniqueJob('old');
		const first = await startJob(jobId, { version: 1.4, execution: '60' });
		const second = await startJob(jobId, { version: 1.3, execution: '61' });
		assert.equal(second.json.fencing_token, first.json.fencing_token + 1);
	});
});
