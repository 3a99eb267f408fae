// Node 1.5 (issue 37): Begin Step and Record Outcome tell the ledger about the holder's liveness
// (router.ts beatForSteps), as the gated nodes do. A dispatched step is live for LIVE_S (the
// builder's node writes between them), a recorded one hands over after HANDOVER_S, so a duplicate
// execution of the job waits for the write and goes on soon after it. Before 1.5 neither beats.
// A fake IExecuteFunctions, a REAL ledger: the lease's live_until is read back from the ledger.
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

const renewals = (calls) => calls.filter((c) => c.method === 'POST' && c.url.endsWith('/lease/renew')).map((c) => c.body);

async function startJob(jobId, execution) {
	return (await runStartJob(creds, jobId, { version: 1.5, execution, items: [{ json: { order: 7 } }] })).out[0][0];
}

async function beginStep(item, version, execution) {
	// 1.5 finds the job on Start Job's item; before 1.5 the builder's expressions name it
	const job = version >= 1.5 ? {} : { jobId: item.json.job_id, fencingToken: item.json.fencing_token };
	return await runNode({
		items: [item],
		credentials: creds,
		nodeVersion: version,
		executionId: execution,
		params: { operation: 'beginStep', action: 'create_order', beginOptions: {}, ...job },
	});
}

async function recordOutcome(durable, version, execution) {
	return await runNode({
		items: [{ json: { id: 'ord-1', durable } }],
		credentials: creds,
		nodeVersion: version,
		executionId: execution,
		params: {
			operation: 'recordOutcome',
			operationKey: durable.operation_key,
			fencingToken: durable.fencing_token,
			outcome: 'confirm',
			remoteId: 'ord-1',
			receipt: { id: 'ord-1' },
		},
	});
}

/** Seconds from now until the lease's live_until, as the ledger has it. */
async function liveFor(jobId) {
	const res = await fetch(`${ledger.url}/v1/jobs/${encodeURIComponent(jobId)}`, { headers: { Authorization: `Bearer ${RUNNER_TOKEN}` } });
	const job = await res.json();
	const lease = job.lease ?? job.job?.lease;
	return lease?.live_until ? (Date.parse(lease.live_until) - Date.now()) / 1000 : null;
}

describe('Begin Step and Record Outcome beat (node 1.5, issue 37)', () => {
	test('begin_step_marks_a_dispatched_step_live_for_10_s_and_record_outcome_hands_over_after_3_s', async () => {
		const jobId = uniqueJob('steps-beat');
		const start = await startJob(jobId, '70');
		const begun = await beginStep(start, 1.5, '70');
		const proceed = begun.out[0][0].json.durable;
		assert.equal(proceed.decision, 'dispatch');
		// the beat rides on the begin: one ledger call, no renew of its own
		assert.deepEqual(begun.calls.map((c) => c.url.split('/').pop()), ['begin']);
		assert.deepEqual(begun.calls[0].body.heartbeat, { owner: 'n8n-exec-70', live_s: 10 });
		const afterBegin = await liveFor(jobId);
		assert.ok(afterBegin > 8 && afterBegin <= 10.5, `live for ${afterBegin} s after Begin Step`);

		const recorded = await recordOutcome(proceed, 1.5, '70');
		assert.equal(recorded.out[0][0].json.durable.decision, 'recorded');
		assert.deepEqual(recorded.calls.map((c) => c.url.split('/').pop()), ['confirm']);
		assert.deepEqual(recorded.calls[0].body.heartbeat, { owner: 'n8n-exec-70', live_s: 3 });
		const afterRecord = await liveFor(jobId);
		assert.ok(afterRecord > 1 && afterRecord <= 3.5, `live for ${afterRecord} s after Record Outcome`);
	});

	test('begin_step_done_before_hands_over_after_3_s', async () => {
		const jobId = uniqueJob('steps-done-before');
		const start = await startJob(jobId, '71');
		const proceed = (await beginStep(start, 1.5, '71')).out[0][0].json.durable;
		await recordOutcome(proceed, 1.5, '71');
		const again = await startJob(jobId, '72');
		const begun = await beginStep(again, 1.5, '72');
		assert.equal(begun.out[1][0].json.durable.decision, 'reuse_receipt');
		// the begin carried 10 s (it could have been dispatched); not dispatched, the node hands over
		assert.deepEqual(renewals(begun.calls), [{ owner: 'n8n-exec-72', fencing_token: again.json.fencing_token, live_s: 3 }]);
		const left = await liveFor(jobId);
		assert.ok(left > 1 && left <= 3.5, `live for ${left} s after a done-before Begin Step`);
	});

	test('begin_step_and_record_outcome_before_1_5_send_no_heartbeat', async () => {
		const jobId = uniqueJob('steps-old');
		const start = await startJob(jobId, '73');
		const begun = await beginStep(start, 1.4, '73');
		assert.deepEqual(renewals(begun.calls), []);
		assert.equal(begun.calls[0].body.heartbeat, undefined);
		const recorded = await recordOutcome(begun.out[0][0].json.durable, 1.4, '73');
		assert.deepEqual(renewals(recorded.calls), []);
		assert.equal(recorded.calls[0].body.heartbeat, undefined);
	});

	test('a_failure_recorded_by_record_outcome_hands_over_by_a_beat_of_its_own', async () => {
		const jobId = uniqueJob('steps-fail');
		const start = await startJob(jobId, '74');
		const proceed = (await beginStep(start, 1.5, '74')).out[0][0].json.durable;
		const { calls } = await runNode({
			items: [{ json: { durable: proceed } }],
			credentials: creds,
			nodeVersion: 1.5,
			executionId: '74',
			params: { operation: 'recordOutcome', operationKey: proceed.operation_key, fencingToken: proceed.fencing_token, outcome: 'fail', retryable: true, errorMessage: 'refused', needsAttention: 'route' },
		});
		assert.deepEqual(calls.map((c) => c.url.split('/').pop()), ['fail', 'renew']);
		assert.equal(calls[0].body.heartbeat, undefined);
		assert.equal(calls[1].body.live_s, 3);
	});
});
