// Gated Sub-workflow against a REAL ledger; the sub-workflows are JS stand-ins run by the fake
// context's executeWorkflow, writing to an in-memory "remote" that counts what it committed.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { runNode, runStartJob } from './fake-context.mjs';
import { RUNNER_TOKEN, startLedger } from './ledger.mjs';

let ledger;
let creds;
let seq = 0;
const uniqueJob = (name) => `${name}-${process.pid}-${++seq}`;

/** The remote the sub-workflows write to: rows by operation key, and every input they got. */
const remote = { rows: [], inputs: [], lookups: [] };
const committed = (jobId) => remote.rows.filter((r) => r.key.includes(`:${jobId}:`)).length;

function insertRow(input) {
	const row = { id: `row-${remote.rows.length + 1}`, key: input.durable.operation_key, order: input.order };
	remote.rows.push(row);
	return row;
}

/**
 * Sub-workflows by ID, as the fake executeWorkflow runs them (input: the items' json). Each stands
 * for a workflow of n8n nodes after an Execute Workflow Trigger; what it returns is its last
 * node's output.
 */
const WORKFLOWS = {
	insert: async ([input]) => {
		remote.inputs.push(input);
		const row = insertRow(input);
		return [{ id: row.id, order: row.order, link: `https://db.test/${row.id}`, internal: 'x' }];
	},
	// The row is written, then a later node of the sub-workflow fails (n8n throws the sub-execution's error).
	insertThenFail: async ([input]) => {
		remote.inputs.push(input);
		insertRow(input);
		throw new Error('Send Email: 554 mailbox unavailable');
	},
	// Fails before it writes anything, and cannot tell: the node threw.
	failFirst: async ([input]) => {
		remote.inputs.push(input);
		if (remote.inputs.filter((x) => x.durable.operation_key === input.durable.operation_key).length === 1) {
			throw new Error('Postgres: connection terminated');
		}
		const row = insertRow(input);
		return [{ id: row.id }];
	},
	// Catches its own error and proves nothing was written (the convention: outcome failed).
	declaredFailed: async ([input]) => {
		remote.inputs.push(input);
		return [{ outcome: 'failed', retryable: true, message: 'duplicate email address, nothing inserted' }];
	},
	declaredFinal: async ([input]) => {
		remote.inputs.push(input);
		return [{ outcome: 'failed', retryable: false, message: 'customer deleted' }];
	},
	// Sends an email: nothing to return, its last node outputs nothing.
	silent: async ([input]) => {
		remote.inputs.push(input);
		insertRow(input);
		return [];
	},
	// Takes 1.5 s before its write lands (a slow database, a queue).
	slowInsert: async ([input]) => {
		remote.inputs.push(input);
		await new Promise((r) => setTimeout(r, 1500));
		const row = insertRow(input);
		return [{ id: row.id }];
	},
	// The lookup sub-workflow: finds the row by operation key.
	lookUpRow: async ([input]) => {
		remote.lookups.push(input);
		const row = remote.rows.find((r) => r.key === input.durable.operation_key);
		return [row ? { result: 'found', remote_id: row.id, receipt: { id: row.id, link: `https://db.test/${row.id}` } } : { result: 'absent' }];
	},
	lookUpUndecidable: async ([input]) => {
		remote.lookups.push(input);
		return [{ result: 'undecidable', evidence: { searched: 'orders' } }];
	},
	lookUpConfused: async ([input]) => {
		remote.lookups.push(input);
		return [{ rows: 2 }];
	},
};

before(async () => {
	ledger = await startLedger();
	creds = { baseUrl: `${ledger.url}/`, token: RUNNER_TOKEN };
});
after(async () => {
	await ledger?.stop();
});

async function startJob(jobId, owner = 'exec-A') {
	return (await runStartJob(creds, jobId, { version: 1.2, owner })).out[0][0].json;
}

const rl = (id) => ({ __rl: true, mode: 'list', value: id, cachedResultName: `Sub ${id}` });

function gatedParams(job, workflow, extra = {}) {
	return {
		operation: 'gatedSubworkflow',
		jobId: job.job_id,
		fencingToken: job.fencing_token,
		action: 'insert_row',
		workflowId: rl(workflow),
		payloadSource: 'item',
		remoteIdPath: 'id',
		receiptFields: 'link, order',
		lookUp: false,
		gateOptions: {},
		needsAttention: 'route',
		...extra,
	};
}

const lookUp = (workflow = 'lookUpRow') => ({ lookUp: true, lookUpWorkflowId: rl(workflow) });

/** One execution: Start Job (a takeover, as every new n8n execution), then the node on Start Job's item plus the order. */
async function run(jobId, workflow, extra = {}, orders = [7], owner = 'exec-A') {
	const job = await startJob(jobId, owner);
	const items = orders.map((order) => ({ json: { ...job, order } }));
	const { out } = await runNode({ items, credentials: creds, nodeVersion: 1.2, params: gatedParams(job, workflow, extra), workflows: WORKFLOWS });
	return out.map((o) => o.map((x) => x.json));
}

describe('gated sub-workflow', () => {
	test('runs_once_with_the_item_and_the_ticket_and_a_rerun_is_done_before_with_the_receipt', async () => {
		const jobId = uniqueJob('gs-once');
		const [done, before, attention] = await run(jobId, 'insert');
		assert.deepEqual([done.length, before.length, attention.length], [1, 0, 0]);
		assert.equal(done[0].durable.state, 'CONFIRMED');
		assert.equal(done[0].id, remote.rows.at(-1).id);
		assert.equal(done[0].internal, 'x', 'Done: the sub-workflow\'s whole first item');
		const input = remote.inputs.at(-1);
		assert.equal(input.order, 7, 'the input item');
		assert.equal(input.job_id, jobId);
		assert.deepEqual(Object.keys(input.durable).sort(), ['action', 'attempt', 'fencing_token', 'job_id', 'operation_key']);
		assert.deepEqual(
			[input.durable.job_id, input.durable.action, input.durable.operation_key, input.durable.attempt],
			[jobId, 'insert_row', done[0].durable.operation_key, 1],
		);

		const [done2, before2] = await run(jobId, 'insert', {}, [7], 'exec-B');
		assert.equal(done2.length, 0);
		assert.deepEqual(before2[0], { ...before2[0], id: done[0].id, link: done[0].link, order: 7 }, 'Done Before reads like Done for the receipt fields');
		assert.equal(before2[0].internal, undefined, 'only the chosen fields are kept');
		assert.equal(before2[0].durable.remote_id, done[0].id);
		assert.equal(committed(jobId), 1);
	});

	test('the_digest_is_the_item_without_durable_fields_so_a_changed_item_is_refused_before_the_run', async () => {
		const jobId = uniqueJob('gs-digest');
		await run(jobId, 'insert');
		const calls = remote.inputs.length;
		const [, , attention] = await run(jobId, 'insert', {}, [8]);
		assert.equal(attention[0].durable.reason, 'digest_mismatch');
		assert.equal(remote.inputs.length, calls, 'the sub-workflow did not run');
		// A custom payload: only what it names is digested.
		const jobId2 = uniqueJob('gs-custom');
		const custom = { payloadSource: 'custom', payload: () => ({ kind: 'row' }) };
		await run(jobId2, 'insert', custom);
		const [, before2] = await run(jobId2, 'insert', custom, [8]);
		assert.equal(before2.length, 1);
		await assert.rejects(run(uniqueJob('gs-volatile'), 'insert', { payloadSource: 'custom', payload: (i, item) => item.json }), /fencing_token.*digest_mismatch/);
	});

	test('a_custom_input_is_what_the_sub_workflow_gets_and_what_is_digested', async () => {
		// After Start Job the item holds only the job and its lease: the business fields come from elsewhere.
		const jobId = uniqueJob('gs-input');
		const custom = { inputSource: 'custom', subworkflowInput: () => JSON.stringify({ order: 9, customer: 'C-1' }) };
		const [done] = await run(jobId, 'insert', custom, [7]);
		const input = remote.inputs.at(-1);
		assert.deepEqual(Object.keys(input).sort(), ['customer', 'durable', 'order']);
		assert.equal(done[0].order, 9);
		// The digest is that input: the input item's own fields do not matter, the custom input's do.
		const [, before2] = await run(jobId, 'insert', custom, [8]);
		assert.equal(before2.length, 1);
		const [, , attention3] = await run(jobId, 'insert', { ...custom, subworkflowInput: () => ({ order: 10, customer: 'C-1' }) });
		assert.equal(attention3[0].durable.reason, 'digest_mismatch');
		await assert.rejects(run(uniqueJob('gs-input-bad'), 'insert', { inputSource: 'custom', subworkflowInput: () => [1, 2] }), /"Input \(JSON\)" must be a JSON object/);
		assert.equal(committed(jobId), 1);
	});

	test('a_sub_workflow_that_throws_after_writing_is_unknown_and_the_lookup_finds_it_without_a_second_write', async () => {
		const jobId = uniqueJob('gs-throw');
		const [done, , attention] = await run(jobId, 'insertThenFail', lookUp());
		assert.equal(done.length, 0);
		assert.equal(attention[0].durable.state, 'UNKNOWN', 'a failed sub-workflow may have written part');
		assert.match(attention[0].subworkflow.error, /554 mailbox/);
		assert.match(attention[0].subworkflow.workflow_execution_id, /^sub-/);
		assert.equal(attention[0].order, 7, 'Attention keeps the item');
		const calls = remote.inputs.length;
		const [done2, before2, attention2] = await run(jobId, 'insertThenFail', lookUp());
		assert.deepEqual([done2.length, attention2.length], [0, 0], JSON.stringify(attention2));
		assert.equal(before2[0].durable.remote_id, remote.rows.find((r) => r.key === attention[0].durable.operation_key).id);
		assert.equal(before2[0].durable.lookup.verdict, 'found');
		assert.equal(before2[0].link, `https://db.test/${before2[0].durable.remote_id}`, 'the lookup\'s receipt');
		assert.equal(remote.inputs.length, calls, 'not run again');
		assert.equal(remote.lookups.at(-1).durable.operation_key, attention[0].durable.operation_key, 'the lookup got the ticket');
		assert.equal(committed(jobId), 1);
	});

	test('without_a_lookup_a_thrown_sub_workflow_stays_attention_and_is_not_run_again', async () => {
		const jobId = uniqueJob('gs-nolookup');
		await run(jobId, 'insertThenFail');
		const calls = remote.inputs.length;
		const [done2, before2, attention2] = await run(jobId, 'insertThenFail');
		assert.deepEqual([done2.length, before2.length, attention2.length], [0, 0, 1]);
		assert.equal(remote.inputs.length, calls);
		assert.equal(committed(jobId), 1);
	});

	test('a_lookup_that_proves_absence_runs_the_next_attempt_in_the_same_node', async () => {
		const jobId = uniqueJob('gs-absent');
		const [, , attention] = await run(jobId, 'failFirst', lookUp());
		assert.equal(attention[0].durable.state, 'UNKNOWN');
		assert.equal(committed(jobId), 0);
		const [done2] = await run(jobId, 'failFirst', lookUp());
		assert.equal(done2.length, 1, 'absent: dispatched again and confirmed in one node');
		assert.equal(done2[0].durable.attempt, 2);
		assert.equal(committed(jobId), 1);
	});

	test('a_lookup_without_a_verdict_proves_nothing_the_step_stays_unknown_and_a_fixed_lookup_settles_it', async () => {
		const jobId = uniqueJob('gs-confused');
		await run(jobId, 'insertThenFail', lookUp('lookUpConfused'));
		const calls = remote.inputs.length;
		const [done2, before2, attention2] = await run(jobId, 'insertThenFail', lookUp('lookUpConfused'));
		assert.deepEqual([done2.length, before2.length, attention2.length], [0, 0, 1]);
		assert.equal(attention2[0].durable.reason, 'lookup_failed');
		assert.match(attention2[0].durable.explanation, /answered result null, not result found, absent or undecidable/);
		// A lookup sub-workflow that throws is the same: nothing proven, nothing reported.
		const [, , attention3] = await run(jobId, 'insertThenFail', lookUp('missing'));
		assert.equal(attention3[0].durable.reason, 'lookup_failed');
		const [, before4] = await run(jobId, 'insertThenFail', lookUp());
		assert.equal(before4.length, 1, 'the fixed lookup finds it');
		assert.equal(remote.inputs.length, calls, 'never run again');
		assert.equal(committed(jobId), 1);
	});

	test('an_answered_undecidable_goes_to_review', async () => {
		const jobId = uniqueJob('gs-undecidable');
		await run(jobId, 'insertThenFail', lookUp('lookUpUndecidable'));
		const [, , attention2] = await run(jobId, 'insertThenFail', lookUp('lookUpUndecidable'));
		assert.notEqual(attention2[0].durable.reason, 'lookup_failed');
		assert.equal(attention2[0].durable.lookup.verdict ?? attention2[0].durable.lookup.result, 'undecidable', JSON.stringify(attention2[0].durable));
		assert.equal(committed(jobId), 1);
	});

	test('with_an_in_flight_window_a_second_execution_does_not_run_it_again_while_the_first_may_still_write', async () => {
		const jobId = uniqueJob('gs-twice');
		const slow = { ...lookUp(), gateOptions: { inFlightMs: 3000 } };
		const first = run(jobId, 'slowInsert', slow, [7], 'exec-A');
		await new Promise((r) => setTimeout(r, 300));
		const [done, before, attention] = await run(jobId, 'slowInsert', slow, [7], 'exec-B');
		assert.deepEqual([done.length, before.length], [0, 0]);
		assert.equal(attention[0].durable.reason, 'in_flight_lookup', JSON.stringify(attention[0].durable));
		const [aDone] = await first; // fenced out, but its answer is the attempt's own: it settles (issue 37)
		assert.equal(aDone.length, 1, 'A: Done');
		await new Promise((r) => setTimeout(r, 3000));
		const [, again] = await run(jobId, 'slowInsert', slow, [7], 'exec-C');
		assert.equal(again.length, 1, 'found: Done Before');
		assert.equal(committed(jobId), 1, 'one write');
	});

	test('a_declared_failure_is_recorded_as_failed_and_retried_unless_it_says_not_to', async () => {
		const jobId = uniqueJob('gs-failed');
		const [, , attention] = await run(jobId, 'declaredFailed');
		assert.equal(attention[0].durable.state, 'FAILED');
		assert.equal(attention[0].message, 'duplicate email address, nothing inserted');
		const [, , attention2] = await run(jobId, 'declaredFailed');
		assert.deepEqual([attention2[0].durable.reason, attention2[0].durable.attempt], ['failed', 2], 'retryable: a new attempt');
		const jobId2 = uniqueJob('gs-final');
		await run(jobId2, 'declaredFinal');
		const calls = remote.inputs.length;
		const [done3, before3, attention3] = await run(jobId2, 'declaredFinal');
		assert.deepEqual([done3.length, before3.length, attention3.length], [0, 0, 1]);
		assert.equal(remote.inputs.length, calls, 'not retryable: not run again');
	});

	test('a_sub_workflow_without_output_is_done_with_the_operation_key_as_its_remote_id', async () => {
		const jobId = uniqueJob('gs-silent');
		const [done] = await run(jobId, 'silent');
		assert.equal(done[0].durable.state, 'CONFIRMED');
		assert.equal(done[0].durable.remote_id, done[0].durable.operation_key);
		const [, before2] = await run(jobId, 'silent');
		assert.equal(before2.length, 1);
		assert.equal(committed(jobId), 1);
	});

	test('many_items_begin_in_one_batch_and_each_runs_once', async () => {
		const jobId = uniqueJob('gs-batch');
		const perItem = { action: (i) => `insert_row:${i + 1}` };
		const [done] = await run(jobId, 'insert', perItem, [1, 2, 3]);
		assert.deepEqual(done.map((d) => d.order), [1, 2, 3]);
		const [done2, before2] = await run(jobId, 'insert', perItem, [1, 2, 3]);
		assert.deepEqual([done2.length, before2.length], [0, 3]);
		assert.equal(committed(jobId), 3);
	});

	test('by_default_attention_fails_the_execution_with_the_reason', async () => {
		await assert.rejects(run(uniqueJob('gs-fail'), 'insertThenFail', { needsAttention: undefined }), /outcome_unknown/);
	});

	test('an_empty_selector_is_a_clear_error_and_nothing_is_begun', async () => {
		const calls = remote.inputs.length;
		await assert.rejects(run(uniqueJob('gs-empty'), 'insert', { workflowId: { __rl: true, mode: 'list', value: '' } }), /"Sub-Workflow" is empty/);
		await assert.rejects(run(uniqueJob('gs-nolookupwf'), 'insert', { lookUp: true }), /"Lookup Sub-Workflow" is empty/);
		assert.equal(remote.inputs.length, calls);
		// A plain ID (an expression) works as well as the selector's locator.
		const [done] = await run(uniqueJob('gs-plainid'), 'insert', { workflowId: 'insert' });
		assert.equal(done.length, 1);
	});
});
