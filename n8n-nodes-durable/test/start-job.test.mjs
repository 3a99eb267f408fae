// Start Job as n8n runs it (issue 24, traps 1 and 3), against a REAL ledger: a new execution takes
// the lease of the one before it without an option (node 1.2), still fenced; Task Version starts
// a higher version of the job and refuses a lower one; lease_held names the option and an ISO time.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { runNode } from './fake-context.mjs';
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
	const { out, calls } = await runNode({
		items: [{ json: {} }],
		credentials: creds,
		nodeVersion: version,
		executionId: execution,
		params: { operation: 'startJob', jobId, taskVersion, pipeline: 'generic', owner: `n8n-exec-${execution}`, startOptions },
	});
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
		assert.deepEqual(second.calls.find((c) => c.url.endsWith('/lease')).body.takeover, true);
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
		assert.deepEqual(second.calls.map(path), [
			`PUT /v1/jobs/${jobId}`,
			`POST /v1/jobs/${jobId}/lease`,
			`POST /v1/jobs/${jobId}/versions`,
		]);
		assert.deepEqual(second.calls[2].body, { fencing_token: second.json.fencing_token, task_version: 3 });
		// the same step of the new version is a new operation, dispatched again (another payload is fine)
		const v3 = await begin(jobId, second.json.fencing_token, { title: 'Hello again' });
		assert.equal(v3[0][0].json.durable.operation_key, `acme:${jobId}:v3:send`);
		// the same Task Version on the next run changes nothing
		const third = await startJob(jobId, { execution: '42', taskVersion: 3 });
		assert.equal(third.json.task_version, 3);
		assert.equal(third.calls.length, 2);
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
		assert.deepEqual(calls.map(path), [`PUT /v1/jobs/${jobId}`]);
	});

	test('start_job_lower_task_version_on_1_1_is_noted_not_silent', async () => {
		const jobId = uniqueJob('lower-old');
		await startJob(jobId, { version: 1.1, execution: '60', taskVersion: 2 });
		const again = await startJob(jobId, { version: 1.1, execution: '61', taskVersion: 1, startOptions: { takeover: true } });
		assert.equal(again.json.task_version, 2);
		assert.match(again.json.task_version_note, /Task Version 1 is lower than the job's task version 2/);
	});
});
