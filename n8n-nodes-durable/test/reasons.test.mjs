// What users read on Needs Attention items: the ledger's own message when it sent one, the
// node's one list of reasons (reasons.ts) when it did not. A REAL ledger for the first half.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import { createRequire } from 'node:module';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { runNode } from './fake-context.mjs';
import { RUNNER_TOKEN, startLedger } from './ledger.mjs';

const require = createRequire(import.meta.url);
const { REASONS, explain, explainOwn } = require('../dist/nodes/DurableStep/reasons.js');

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const STATES = path.join(REPO, 'ledger-service', 'durable_ledger', 'kernel', 'states.py');

/** The keys of the ledger's MESSAGES table (kernel/states.py), read from its source. */
function ledgerMessageCodes() {
	const source = fs.readFileSync(STATES, 'utf8');
	const block = /^MESSAGES = \{\n([\s\S]*?)^\}/m.exec(source);
	assert.ok(block, `no MESSAGES = {...} in ${STATES}`);
	const codes = [...block[1].matchAll(/^\s+"([a-z_]+)":/gm)].map((m) => m[1]);
	assert.ok(codes.length >= 10, `only ${codes.length} codes read from MESSAGES`);
	return codes;
}

/**
 * Every reason code the ledger can put on a begin / lookup-result answer, or on a refusal the
 * node routes to Needs Attention: MESSAGES, plus the gate's halts that carry their own message
 * (a used-up budget; a job halted without a recorded reason, whose reason is its status).
 */
const LEDGER_CODES = () => [...ledgerMessageCodes(), 'budget_exhausted', 'halted', 'digest_mismatch', 'action_mismatch', 'target_mismatch', 'job_mismatch', 'stale_fencing_token'];
/** The codes the node sets itself (Look Up, Record Outcome, needs_review for awaiting_editor). */
const NODE_CODES = ['needs_review', 'lookup_required', 'lookup_not_applied', 'lookup_failed', 'in_flight_lookup', 'failed'];

describe('the shared list of reasons', () => {
	test('every_reason_code_the_ledger_can_send_has_an_entry', () => {
		const missing = [...LEDGER_CODES(), ...NODE_CODES].filter((code) => !REASONS[code]);
		assert.deepEqual(missing, []);
	});

	test('the_list_uses_the_ledgers_code_names', () => {
		const known = new Set([...LEDGER_CODES(), ...NODE_CODES]);
		assert.deepEqual(Object.keys(REASONS).filter((code) => !known.has(code)), [], 'codes the ledger does not send');
		assert.ok(REASONS.retry_budget_exhausted);
		assert.equal(REASONS.attempts_exhausted, undefined);
	});

	test('the_ledger_message_is_used_when_present_and_the_list_only_without_one', () => {
		assert.equal(explain('retry_budget_exhausted', 'the ledger says so'), 'the ledger says so');
		for (const none of [undefined, null, '', 42, {}]) {
			assert.equal(explain('retry_budget_exhausted', none), REASONS.retry_budget_exhausted);
		}
		// The ledger echoes a code it has no words for (MESSAGES.get(reason, reason)).
		assert.equal(explain('halted', 'halted'), REASONS.halted);
		assert.equal(explain('something_new'), 'The ledger stopped this step (something_new).');
	});

	test('what_the_node_decides_itself_is_worded_by_the_list_with_the_ledgers_words_after_it', () => {
		assert.equal(explainOwn('lookup_required'), REASONS.lookup_required);
		assert.equal(explainOwn('digest_mismatch', 'first used with another request'), `${REASONS.digest_mismatch} (ledger: first used with another request)`);
	});
});

describe('explanations from a real ledger', () => {
	let ledger;
	let creds;
	let seq = 0;
	before(async () => {
		ledger = await startLedger();
		creds = { baseUrl: ledger.url, token: RUNNER_TOKEN };
	});
	after(async () => {
		await ledger?.stop();
	});

	async function startJob(budgets) {
		const jobId = `reasons-${process.pid}-${++seq}`;
		const params = { operation: 'startJob', jobId, taskVersion: 1, pipeline: 'generic', owner: 'exec-A', startOptions: { budgets } };
		const { out } = await runNode({ items: [{ json: {} }], credentials: creds, params });
		return out[0][0].json;
	}
	const beginParams = (job, action, beginOptions = {}) => ({
		operation: 'beginStep',
		jobId: job.job_id,
		fencingToken: job.fencing_token,
		action,
		payload: { action },
		beginOptions,
	});
	const begin = async (job, action, beginOptions) =>
		(await runNode({ items: [{ json: {} }], credentials: creds, params: beginParams(job, action, beginOptions) })).out;

	/** Needs Attention's item, and what the ledger itself answers to the same begin. */
	async function stoppedWith(job, action, beginOptions = {}) {
		const out = await begin(job, action, beginOptions);
		assert.equal(out[2].length, 1, 'Needs Attention');
		const body = { job_id: job.job_id, action, payload: { action }, fencing_token: job.fencing_token, requires_approval: beginOptions.requiresApproval === true };
		const again = await ledger.api('POST', '/v1/operations/begin', body);
		return { durable: out[2][0].json.durable, ledgerAnswer: again.body };
	}

	test('approval_required_is_explained_in_the_ledgers_words', async () => {
		const job = await startJob({});
		const { durable, ledgerAnswer } = await stoppedWith(job, 'publish', { requiresApproval: true });
		assert.equal(durable.reason, 'approval_required');
		assert.ok(ledgerAnswer.message);
		assert.equal(durable.explanation, ledgerAnswer.message);
	});

	test('retry_budget_exhausted_is_explained_in_the_ledgers_words', async () => {
		const job = await startJob({ max_attempts: 1 });
		const d = (await begin(job, 'send'))[0][0].json.durable;
		const params = { operation: 'recordOutcome', operationKey: d.operation_key, fencingToken: d.fencing_token, outcome: 'fail', retryable: true, errorMessage: 'bad' };
		await runNode({ items: [{ json: {} }], credentials: creds, params });
		const { durable, ledgerAnswer } = await stoppedWith(job, 'send');
		assert.equal(durable.reason, 'retry_budget_exhausted');
		assert.equal(durable.explanation, ledgerAnswer.message);
	});

	test('a_used_up_budget_is_explained_in_the_ledgers_words', async () => {
		const job = await startJob({ max_tool_calls: 1 });
		assert.equal((await begin(job, 'first'))[0].length, 1);
		const { durable, ledgerAnswer } = await stoppedWith(job, 'second');
		assert.equal(durable.reason, 'budget_exhausted');
		assert.match(durable.explanation, /max_tool_calls/);
		assert.equal(durable.explanation, ledgerAnswer.message);
	});
});

describe('explanations without a ledger message', () => {
	let server;
	let url;
	before(async () => {
		// A ledger that answers every begin with a halt and no message (an older ledger).
		server = http.createServer((req, res) => {
			req.resume();
			req.on('end', () => {
				res.writeHead(200, { 'content-type': 'application/json' });
				res.end(JSON.stringify({ decision: 'halt', reason: 'retry_budget_exhausted', operation: { operation_key: 'k', state: 'FAILED' } }));
			});
		});
		await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
		url = `http://127.0.0.1:${server.address().port}`;
	});
	after(() => new Promise((resolve) => server.close(resolve)));

	test('the_shared_list_explains_a_halt_the_ledger_sent_without_a_message', async () => {
		const params = { operation: 'beginStep', jobId: 'j', fencingToken: 1, action: 'a', payload: {}, beginOptions: {} };
		const { out } = await runNode({ items: [{ json: {} }], credentials: { baseUrl: url, token: 't' }, params });
		const d = out[2][0].json.durable;
		assert.equal(d.reason, 'retry_budget_exhausted');
		assert.equal(d.explanation, REASONS.retry_budget_exhausted);
	});
});
