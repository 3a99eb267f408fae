// Gated HTTP Request against a REAL ledger and a local remote that counts what it committed.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import http from 'node:http';
import { after, before, describe, test } from 'node:test';
import { runNode, runStartJob } from './fake-context.mjs';
import { RUNNER_TOKEN, startLedger } from './ledger.mjs';

let ledger;
let creds;
let remote;
let seq = 0;
const uniqueJob = (name) => `${name}-${process.pid}-${++seq}`;

/**
 * POST /orders/<mode>: commits the order (stored by its Idempotency-Key) unless the mode says it
 * fails first, then answers as the mode says: ok 201, after500 (committed, then 500), hang
 * (committed, no answer in time), reject422 (nothing committed), slow (commits after 1.5 s), flaky500 (the first
 * try of a key fails with 500 before committing, later ones commit). GET /orders?key=K: the orders
 * committed under key K, as a list; GET /orders-flaky?key=K the same, but 503 the first time per key.
 */
function startRemote() {
	const state = { commits: [], requests: [] };
	const server = http.createServer((req, res) => {
		let raw = '';
		req.on('data', (c) => (raw += c));
		req.on('end', () => {
			const url = new URL(req.url, 'http://x');
			const answer = (status, body) => {
				res.writeHead(status, { 'Content-Type': 'application/json' });
				res.end(JSON.stringify(body));
			};
			state.requests.push({ method: req.method, path: url.pathname, headers: req.headers, raw });
			if (req.method === 'GET') {
				const key = url.searchParams.get('key');
				const looked = state.requests.filter((r) => r.method === 'GET' && r.raw === '' && r.path === url.pathname && r.key === key);
				state.requests[state.requests.length - 1].key = key;
				if (url.pathname === '/orders-flaky' && looked.length === 0) return answer(503, { error: 'lookup down' });
				const listed = (all) => (all ? state.commits : state.commits.filter((c) => c.key === key)).map((c) => ({ id: c.id, key: c.key, number: c.number }));
				// How real APIs answer a list: bare, wrapped, Stripe's list object, a filter ignored,
				// a 200 that is an error, a web page in front of the API.
				if (url.pathname === '/orders-all') return answer(200, listed(true));
				if (url.pathname === '/orders-wrapped') return answer(200, { data: listed(false), meta: { total: listed(false).length } });
				if (url.pathname === '/orders-stripe') return answer(200, { object: 'list', url: '/v1/orders', has_more: false, data: listed(false) });
				if (url.pathname === '/orders-404') return answer(404, { error: 'no such route' });
				if (url.pathname === '/orders-error') return answer(200, { error: { type: 'rate_limit', message: 'too many lookups' } });
				if (url.pathname === '/orders-html') {
					res.writeHead(200, { 'Content-Type': 'text/html' });
					return res.end('<html><body>Sign in</body></html>');
				}
				return answer(200, listed(false));
			}
			const mode = url.pathname.split('/')[2] ?? 'ok';
			if (mode === 'reject422') return answer(422, { error: 'bad order' });
			if (mode.startsWith('dedupe-')) {
				// A remote that keeps the first answer under the Idempotency-Key (the IETF draft's
				// semantics): a repeat is answered the stored result and commits nothing.
				const stored = state.commits.find((c) => c.key === req.headers['idempotency-key']);
				if (stored && mode === 'dedupe-replay500') {
					// A remote that stored the 500 it answered, and says so.
					res.writeHead(500, { 'Content-Type': 'application/json', 'Idempotent-Replayed': 'true' });
					return res.end(JSON.stringify({ error: 'committed, then failed' }));
				}
				if (stored) return answer(201, { id: stored.id, number: stored.number, replayed: true });
				const order = { id: `ord-${state.commits.length + 1}`, key: req.headers['idempotency-key'], number: 7, body: raw };
				state.commits.push(order);
				if (mode === 'dedupe-after500' || mode === 'dedupe-replay500') return answer(500, { error: 'committed, then failed' });
				return setTimeout(() => answer(201, order), 1500);
			}
			const firstTry = !state.requests.slice(0, -1).some((r) => r.headers['idempotency-key'] === req.headers['idempotency-key']);
			if (mode === 'flaky500' && firstTry) return answer(500, { error: 'failed before committing' });
			if (mode === 'slow') {
				// The request is on its way: it commits only after 1.5 s.
				return setTimeout(() => {
					const order = { id: `ord-${state.commits.length + 1}`, key: req.headers['idempotency-key'], number: 7, body: raw };
					state.commits.push(order);
					answer(201, order);
				}, 1500);
			}
			const order = { id: `ord-${state.commits.length + 1}`, key: req.headers['idempotency-key'], number: 7, body: raw };
			state.commits.push(order);
			if (mode === 'after500') return answer(500, { error: 'committed, then failed' });
			if (mode === 'hang') return setTimeout(() => answer(201, order), 1500);
			return answer(201, { id: order.id, number: order.number, link: `https://shop.test/o/${order.id}`, secret_token: 'x' });
		});
	});
	return new Promise((resolve) =>
		server.listen(0, '127.0.0.1', () => resolve({ state, url: `http://127.0.0.1:${server.address().port}`, close: () => server.close() })),
	);
}

before(async () => {
	ledger = await startLedger();
	remote = await startRemote();
	creds = { baseUrl: `${ledger.url}/`, token: RUNNER_TOKEN };
});
after(async () => {
	remote?.close();
	await ledger?.stop();
});

async function startJob(jobId, owner = 'exec-A') {
	return (await runStartJob(creds, jobId, { version: 1.2, owner })).out[0][0].json;
}

function gatedParams(job, mode, extra = {}) {
	return {
		operation: 'gatedRequest',
		jobId: job.job_id,
		fencingToken: job.fencing_token,
		action: 'create_order',
		method: 'POST',
		url: `${remote.url}/orders/${mode}`,
		authentication: 'none',
		bodyType: 'json',
		jsonBody: (i, item) => ({ order: item.json.order ?? 7 }),
		remoteIdPath: 'id',
		receiptFields: 'link, number',
		lookUp: false,
		gateOptions: { timeout: 500 },
		needsAttention: 'route',
		...extra,
	};
}

/** One execution of the node: Start Job (a takeover, as every new n8n execution) then the request. */
async function run(jobId, mode, extra = {}, items = [{ json: { order: 7 } }], owner = 'exec-A') {
	const job = await startJob(jobId, owner);
	const { out } = await runNode({ items, credentials: creds, nodeVersion: 1.2, params: gatedParams(job, mode, extra) });
	return out.map((o) => o.map((x) => x.json));
}

const committed = (jobId) => remote.state.commits.filter((c) => c.key?.includes(`:${jobId}:`)).length;
const lookUpOptions = (path = '/orders', extra = {}) => ({
	lookUp: true,
	lookUpUrl: `${remote.url}${path}?key={operation_key}`,
	lookUpMatchField: 'key',
	lookUpRemoteIdPath: 'id',
	lookUpEmptyIsAbsent: true,
	...extra,
});

describe('gated http request', () => {
	test('sends_once_with_the_operation_key_and_a_rerun_is_done_before_with_the_receipt', async () => {
		const jobId = uniqueJob('gr-once');
		const [done, before, attention] = await run(jobId, 'ok');
		assert.equal(done.length, 1);
		assert.equal(done[0].id, 'ord-' + remote.state.commits.length);
		assert.equal(done[0].durable.state, 'CONFIRMED');
		const key = done[0].durable.operation_key;
		const sent = remote.state.requests.filter((r) => r.method === 'POST' && r.headers['idempotency-key'] === key);
		assert.equal(sent.length, 1);
		assert.deepEqual(JSON.parse(sent[0].raw), { order: 7 });
		assert.deepEqual([before.length, attention.length], [0, 0]);

		const [done2, before2] = await run(jobId, 'ok');
		assert.equal(done2.length, 0);
		assert.equal(before2[0].id, done[0].id, 'Done Before reads like Done for the receipt fields');
		assert.equal(before2[0].link, done[0].link);
		assert.equal(before2[0].durable.remote_id, done[0].id);
		assert.equal(before2[0].secret_token, undefined, 'only the chosen fields are kept');
		assert.equal(committed(jobId), 1);
	});

	test('a_500_after_the_commit_is_unknown_and_the_lookup_finds_it_without_a_second_write', async () => {
		const jobId = uniqueJob('gr-500');
		const [done, , attention] = await run(jobId, 'after500', lookUpOptions());
		assert.equal(done.length, 0);
		assert.equal(attention[0].durable.state, 'UNKNOWN');
		assert.equal(attention[0].durable.reason, 'outcome_unknown');
		const [done2, before2, attention2] = await run(jobId, 'after500', lookUpOptions());
		assert.deepEqual([done2.length, attention2.length], [0, 0], JSON.stringify(attention2));
		assert.equal(before2[0].durable.remote_id, remote.state.commits.find((c) => c.key === attention[0].durable.operation_key).id);
		assert.equal(before2[0].durable.lookup.verdict, 'found');
		assert.equal(committed(jobId), 1);
	});

	test('a_timeout_after_the_commit_is_looked_up_and_never_resent', async () => {
		const jobId = uniqueJob('gr-hang');
		const [, , attention] = await run(jobId, 'hang', lookUpOptions());
		assert.equal(attention[0].durable.side_effect_error.errorKind, 'timeout');
		const [, before2] = await run(jobId, 'hang', lookUpOptions());
		assert.equal(before2.length, 1);
		assert.equal(committed(jobId), 1);
	});

	test('without_a_lookup_an_unknown_outcome_stays_attention_and_is_not_resent', async () => {
		const jobId = uniqueJob('gr-nolookup');
		await run(jobId, 'after500');
		const [done2, before2, attention2] = await run(jobId, 'after500');
		assert.deepEqual([done2.length, before2.length, attention2.length], [0, 0, 1]);
		assert.equal(committed(jobId), 1);
	});

	test('a_lookup_that_fails_proves_nothing_the_step_stays_unknown_and_the_next_run_looks_again', async () => {
		const jobId = uniqueJob('gr-lookupdown');
		const flaky = lookUpOptions('/orders-flaky');
		await run(jobId, 'after500', flaky);
		const [, , attention] = await run(jobId, 'after500', flaky);
		assert.deepEqual([attention[0].durable.reason, attention[0].durable.state], ['lookup_failed', 'UNKNOWN']);
		assert.match(attention[0].durable.explanation, /HTTP 503/);
		const [, before] = await run(jobId, 'after500', flaky);
		assert.equal(before.length, 1, 'the second lookup found it: Done Before, no review');
		assert.equal(committed(jobId), 1);
	});

	test('a_second_execution_while_the_first_request_is_in_flight_does_not_send_again', async () => {
		const jobId = uniqueJob('gr-twice');
		const slow = { ...lookUpOptions(), gateOptions: { timeout: 3000 } };
		// Execution A sends; the remote commits it after 1.5 s. B starts meanwhile (Start Job takes over).
		const first = run(jobId, 'slow', slow, undefined, 'exec-A');
		await new Promise((r) => setTimeout(r, 300));
		const [done, before, attention] = await run(jobId, 'slow', slow, undefined, 'exec-B');
		assert.deepEqual([done.length, before.length], [0, 0]);
		assert.equal(attention[0].durable.reason, 'in_flight_lookup', JSON.stringify(attention[0].durable));
		const [aDone] = await first; // fenced out, but its answer is the attempt's own: it settles (issue 37)
		assert.equal(aDone.length, 1, 'A: Done');
		assert.equal(committed(jobId), 1, 'B never sent: one order');
		await new Promise((r) => setTimeout(r, 3000)); // past A's timeout: the lookup decides now
		const [, again] = await run(jobId, 'slow', slow, undefined, 'exec-C');
		assert.equal(again.length, 1, 'found: Done Before');
		assert.equal(committed(jobId), 1);
	});

	test('a_lookup_that_proves_absence_sends_the_next_attempt_in_the_same_node', async () => {
		const jobId = uniqueJob('gr-absent');
		// The remote refuses with 500 before committing anything: unknown to the ledger, absent at the remote.
		const [, , attention] = await run(jobId, 'flaky500', lookUpOptions());
		assert.equal(attention[0].durable.state, 'UNKNOWN', 'a 500 says nothing about the write');
		assert.equal(committed(jobId), 0);
		const [done2] = await run(jobId, 'flaky500', lookUpOptions());
		assert.equal(done2.length, 1, 'absent: dispatched again and confirmed in one node');
		assert.equal(done2[0].durable.attempt, 2);
		assert.equal(done2[0].durable.lookup?.verdict, 'absent', JSON.stringify(done2[0].durable.lookup));
		assert.equal(committed(jobId), 1);
	});

	test('a_422_is_a_definite_failure_and_the_next_run_tries_again', async () => {
		const jobId = uniqueJob('gr-422');
		const [, , attention] = await run(jobId, 'reject422');
		assert.equal(attention[0].durable.state, 'FAILED');
		assert.equal(committed(jobId), 0);
		// A provable failure is retried by the next run (within max_attempts): a new attempt.
		const [done2, , attention2] = await run(jobId, 'reject422');
		assert.deepEqual([done2.length, attention2[0].durable.reason, attention2[0].durable.attempt], [0, 'failed', 2]);
		// The URL is part of the request's digest: the same step sent elsewhere is refused.
		const [, , moved] = await run(jobId, 'ok');
		assert.equal(moved[0].durable.reason, 'digest_mismatch');
		assert.equal(committed(jobId), 0);
	});

	test('a_changed_request_is_refused_before_anything_is_sent', async () => {
		const jobId = uniqueJob('gr-digest');
		await run(jobId, 'ok');
		const before = remote.state.requests.length;
		const [, , attention] = await run(jobId, 'ok', { jsonBody: () => ({ order: 8 }) });
		assert.equal(attention[0].durable.reason, 'digest_mismatch');
		assert.equal(remote.state.requests.length, before, 'nothing reached the remote');
	});

	test('many_items_begin_in_one_batch_and_each_is_sent_once', async () => {
		const jobId = uniqueJob('gr-batch');
		const items = [1, 2, 3].map((n) => ({ json: { order: n } }));
		const perItem = { action: (i) => `create_order:${i + 1}` };
		const [done] = await run(jobId, 'ok', perItem, items);
		assert.equal(done.length, 3);
		const [done2, before2] = await run(jobId, 'ok', perItem, items);
		assert.deepEqual([done2.length, before2.length], [0, 3]);
		assert.equal(committed(jobId), 3);
	});

	test('done_before_items_can_share_the_done_output_so_the_next_node_runs_once', async () => {
		const jobId = uniqueJob('gr-oneout');
		const perItem = { action: (i) => `create_order:${i + 1}`, doneBefore: 'done' };
		const items = [1, 2].map((n) => ({ json: { order: n } }));
		await run(jobId, 'ok', perItem, items.slice(0, 1)); // an earlier run did the first one
		const out = await run(jobId, 'ok', perItem, items);
		assert.equal(out.length, 2, 'Done and Attention only');
		assert.deepEqual(out[0].map((j) => j.durable.decision), ['reuse_receipt', 'recorded']);
		assert.equal(committed(jobId), 2);
	});

	test('by_default_attention_fails_the_execution_with_the_reason', async () => {
		const jobId = uniqueJob('gr-fail');
		await assert.rejects(run(jobId, 'after500', { needsAttention: undefined }), /outcome_unknown/);
		assert.equal(committed(jobId), 1);
	});

	test('the_step_ticket_goes_into_the_body_as_sent_but_not_into_the_digest', async () => {
		const jobId = uniqueJob('gr-ticket');
		const options = { gateOptions: { timeout: 500, ticketInBody: true } };
		const [done] = await run(jobId, 'ok', options);
		const sent = remote.state.requests.filter((r) => r.headers['idempotency-key'] === done[0].durable.operation_key);
		assert.deepEqual(JSON.parse(sent[0].raw), {
			order: 7,
			operation_key: done[0].durable.operation_key,
			job_id: jobId,
			fencing_token: done[0].durable.fencing_token,
		});
		// Another execution takes the job over with a new fencing token: the same step, Done Before.
		const [done2, before2] = await run(jobId, 'ok', options, undefined, 'exec-B');
		assert.deepEqual([done2.length, before2.length], [0, 1]);
		assert.notEqual(before2[0].durable.fencing_token, done[0].durable.fencing_token);
	});

	test('a_digest_payload_is_what_the_ledger_digests_for_a_remote_that_checks_it_itself', async () => {
		const jobId = uniqueJob('gr-payload');
		// The remote's own digest of this write (as the publishing proxy digests its writes).
		const options = (order) => ({ gateOptions: { timeout: 500, ticketInBody: true, payload: { order } } });
		const [done] = await run(jobId, 'ok', options(7));
		const key = done[0].durable.operation_key;
		const res = await fetch(`${ledger.url}/v1/operations/${encodeURIComponent(key)}`, { headers: { Authorization: `Bearer ${RUNNER_TOKEN}` } });
		const operation = (await res.json()).operation ?? {};
		assert.equal(operation.request_hash, createHash('sha256').update('{"order":7}').digest('hex'));
		// A re-run with another payload is refused before anything is sent, as with the request digest.
		const before = remote.state.requests.length;
		const [, , attention] = await run(jobId, 'ok', options(8));
		assert.equal(attention[0].durable.reason, 'digest_mismatch');
		assert.equal(remote.state.requests.length, before);
		await assert.rejects(run(uniqueJob('gr-payload-bad'), 'ok', { gateOptions: { payload: '[1]' } }), /"Digest Payload" must be a JSON object/);
	});

	test('approval_required_goes_to_attention_and_wait_for_approval_registers_it_with_its_defaults', async () => {
		const jobId = uniqueJob('gr-approval');
		const options = { gateOptions: { timeout: 500, requiresApproval: true, target: 'orders:test' } };
		const before = remote.state.requests.length;
		const [done, , attention] = await run(jobId, 'ok', options);
		assert.deepEqual([done.length, attention.length], [0, 1]);
		assert.equal(remote.state.requests.length, before, 'nothing is sent without the approval');
		const durable = attention[0].durable;
		assert.equal(durable.reason, 'approval_required');
		assert.ok(durable.operation_key && Number.isInteger(durable.fencing_token), JSON.stringify(durable));
		// Wait for Approval with its default Operation Key and Fencing Token ($json.durable.*).
		const resumeUrl = 'http://127.0.0.1:5678/webhook-waiting/88?signature=tok-88';
		const { out } = await runNode({
			items: [{ json: attention[0] }],
			credentials: creds,
			executionId: '88',
			params: {
				operation: 'waitForApproval',
				operationKey: (i, item) => item.json.durable.operation_key,
				fencingToken: (i, item) => item.json.durable.fencing_token,
				resumeUrl,
			},
		});
		assert.equal(out[0][0].json.durable.waiting_for, 'approval');
		assert.equal(out[0][0].json.durable.wait.execution_id, '88');
	});

	test('a_lookup_answer_proves_only_what_it_shows_by_shape', async () => {
		// One unrelated order at the remote, so that an API that ignores the filter has something to answer.
		await run(uniqueJob('gr-other'), 'ok');
		const cases = [
			// [lookup path, extra, mode of the write, the verdict, writes at the remote in the end]
			['/orders-all', {}, 'flaky500', 'undecidable', 0], // filter ignored: another order is no proof
			['/orders-all', {}, 'after500', 'found', 1],
			['/orders-wrapped', {}, 'after500', 'found', 1],
			['/orders-wrapped', {}, 'flaky500', 'absent', 1],
			['/orders-stripe', {}, 'after500', 'found', 1],
			['/orders-error', {}, 'after500', 'undecidable', 1],
			['/orders-html', {}, 'after500', 'undecidable', 1],
			['/orders', { lookUpEmptyIsAbsent: false }, 'flaky500', 'undecidable', 0], // empty, no declared filter
			['/orders-404', { lookUpEmptyIsAbsent: false }, 'after500', 'undecidable', 1], // a JSON 404 of a wrong route
			['/orders-404', {}, 'flaky500', 'absent', 1], // declared: the URL addresses the object by the key
			['/orders', { lookUpMatchField: 'number' , lookUpMatchValue: '8' }, 'after500', 'undecidable', 1],
		];
		for (const [path, extra, mode, verdict, writes] of cases) {
			const jobId = uniqueJob(`gr-shape${path.replace(/\W/g, '')}`);
			const options = lookUpOptions(path, extra);
			await run(jobId, mode, options);
			const [done, before, attention] = await run(jobId, mode, options);
			const seen = [...done, ...before, ...attention][0].durable;
			const label = `${path} ${JSON.stringify(extra)} ${mode}: ${JSON.stringify(seen.lookup)}`;
			assert.equal(seen.lookup?.verdict, verdict, label);
			if (verdict === 'found') assert.equal(before.length, 1, label);
			assert.equal(seen.lookup.evidence?.match_field, options.lookUpMatchField, label);
			if (verdict === 'undecidable') assert.deepEqual([done.length, before.length, seen.state], [0, 0, 'NEEDS_REVIEW'], label);
			if (verdict === 'absent') assert.equal(done.length, 1, label);
			assert.equal(committed(jobId), writes, label);
		}
	});

	test('a_lookup_without_a_match_field_is_a_clear_error_and_nothing_is_begun', async () => {
		const jobId = uniqueJob('gr-nomatch');
		const before = remote.state.requests.length;
		await assert.rejects(run(jobId, 'ok', lookUpOptions('/orders', { lookUpMatchField: '' })), /"Look Up Match Field" is empty/);
		assert.equal(remote.state.requests.length, before);
	});

	test('a_remote_that_dedupes_settles_an_unknown_outcome_by_the_same_request_with_the_same_key', async () => {
		for (const mode of ['dedupe-after500', 'dedupe-hang']) {
			const jobId = uniqueJob(`gr-${mode}`);
			const options = { remoteDedupes: true, gateOptions: { timeout: 500 } };
			const [, , attention] = await run(jobId, mode, options);
			assert.equal(attention[0].durable.state, 'UNKNOWN', mode);
			if (mode === 'dedupe-hang') await new Promise((r) => setTimeout(r, 1500)); // past the request's timeout
			const [done2, before2, attention2] = await run(jobId, mode, options);
			assert.deepEqual([done2.length, before2.length, attention2.length], [0, 1, 0], JSON.stringify(attention2));
			assert.equal(before2[0].durable.lookup.verdict, 'found');
			assert.equal(before2[0].durable.remote_id, remote.state.commits.find((c) => c.key === attention[0].durable.operation_key).id);
			assert.equal(committed(jobId), 1, `${mode}: one order`);
		}
		// A stored 500 replayed to every resend would never give a verdict: an editor decides.
		const jobId = uniqueJob('gr-dedupe-replay500');
		const options = { remoteDedupes: true, gateOptions: { timeout: 500 } };
		await run(jobId, 'dedupe-replay500', options);
		const [, , attention] = await run(jobId, 'dedupe-replay500', options);
		assert.deepEqual([attention[0].durable.state, attention[0].durable.lookup?.verdict], ['NEEDS_REVIEW', 'undecidable']);
		assert.equal(committed(jobId), 1);
		await assert.rejects(
			run(uniqueJob('gr-dedupe-noheader'), 'ok', { remoteDedupes: true, gateOptions: { idempotencyHeader: '' } }),
			/"Idempotency Header" is empty/,
		);
	});

	test('a_bad_url_is_a_clear_error_and_nothing_is_begun', async () => {
		const jobId = uniqueJob('gr-badurl');
		await assert.rejects(run(jobId, 'ok', { url: 'ftp://x/y' }), /"URL" must be an http/);
		await assert.rejects(run(jobId, 'ok', { url: 'not a url' }), /"URL" is not a valid URL/);
	});
});

describe('gated http request: the same trigger twice at once (node 1.4, issue 37)', () => {
	async function execution(jobId, owner) {
		const { out: started } = await runStartJob(creds, jobId, { version: 1.4, execution: owner, owner });
		const job = started[0][0].json;
		const params = gatedParams(job, 'hang', { gateOptions: { timeout: 5000 } });
		const { out } = await runNode({ items: [{ json: { order: 7, ...job } }], credentials: creds, nodeVersion: 1.4, executionId: owner, params });
		return { job, out: out.map((o) => o.map((x) => x.json)) };
	}

	test('the_duplicate_waits_for_the_live_holder_and_reads_done_before_one_write_no_failure', async () => {
		const jobId = `twice-${process.pid}`;
		const a = execution(jobId, 'n8n-exec-70');
		await new Promise((r) => setTimeout(r, 50)); // 22-155 ms apart in n8n's reports
		const began = Date.now();
		const b = await execution(jobId, 'n8n-exec-71');
		const first = await a;
		assert.equal(committed(jobId), 1);
		assert.equal(first.out[0].length, 1, JSON.stringify(first.out)); // Done
		assert.equal(b.out[1].length, 1, JSON.stringify(b.out)); // Done Before, from A's receipt
		assert.equal(b.out[1][0].durable.remote_id, first.out[0][0].durable.remote_id);
		assert.equal(b.job.fencing_token, first.job.fencing_token + 1);
		assert.ok(Date.now() - began >= 1400, 'the duplicate waited for the holder');
	});
});

describe('gated http request: the beats ride on the begin and the confirm (node 1.5)', () => {
	const renewals = (calls) => calls.filter((c) => c.url.endsWith('/lease/renew'));
	const ledgerCall = (calls, suffix) => calls.filter((c) => c.url.endsWith(suffix));
	const liveFor = async (jobId) => {
		const res = await fetch(`${ledger.url}/v1/jobs/${encodeURIComponent(jobId)}`, { headers: { Authorization: `Bearer ${RUNNER_TOKEN}` } });
		const job = await res.json();
		const lease = job.lease ?? job.job?.lease;
		return (Date.parse(lease.live_until) - Date.now()) / 1000;
	};
	async function execution(jobId, items, credentials = creds) {
		const owner = 'n8n-exec-80';
		const { out: started } = await runStartJob(credentials, jobId, { version: 1.5, execution: owner, owner });
		const job = started[0][0].json;
		// one order per item: its own step
		const params = gatedParams(job, 'ok', { action: (i, item) => `create_order_${item.json.order}`, gateOptions: { timeout: 5000 } });
		return await runNode({ items: items.map((json) => ({ json: { ...json, ...job } })), credentials, nodeVersion: 1.5, executionId: owner, params });
	}

	test('one_item_costs_two_ledger_calls_the_begin_carries_the_first_beat_the_confirm_the_handover', async () => {
		const jobId = `carried-${process.pid}`;
		const { out, calls } = await execution(jobId, [{ order: 7 }]);
		assert.equal(out[0].length, 1, JSON.stringify(out)); // Done
		assert.equal(committed(jobId), 1);
		assert.deepEqual(calls.map((c) => c.url.split('/').pop()), ['begin', 'confirm']);
		assert.deepEqual(renewals(calls), []);
		const [begin] = ledgerCall(calls, '/v1/operations/begin');
		const [confirm] = ledgerCall(calls, '/confirm');
		assert.deepEqual(begin.body.heartbeat, { owner: 'n8n-exec-80', live_s: 10 });
		assert.deepEqual(confirm.body.heartbeat, { owner: 'n8n-exec-80', live_s: 3 });
		const left = await liveFor(jobId);
		assert.ok(left > 0 && left <= 3, `handed over: live ${left} s more, not 10`);
	});

	test('several_items_beat_on_their_own_and_hand_over_after_the_last_outcome', async () => {
		const jobId = `carried-many-${process.pid}`;
		const { out, calls } = await execution(jobId, [{ order: 1 }, { order: 2 }]);
		assert.equal(out[0].length, 2, JSON.stringify(out));
		assert.equal(committed(jobId), 2);
		assert.deepEqual(renewals(calls).map((c) => c.body.live_s), [10, 3]);
		const handover = renewals(calls)[1];
		const confirms = ledgerCall(calls, '/confirm');
		assert.equal(confirms.length, 2);
		assert.ok(confirms.every((c) => c.answeredAt <= handover.sentAt), 'the handover follows every outcome');
		const left = await liveFor(jobId);
		assert.ok(left > 0 && left <= 3, `handed over: live ${left} s more`);
	});

	test('a_ledger_before_heartbeats_in_calls_gets_the_begin_again_without_and_separate_beats', async () => {
		// The previous release's ledger in front of this one: its strict body schema refuses the
		// field it does not know, with the answer it gives to any unknown field.
		const older = http.createServer(async (req, res) => {
			let raw = '';
			for await (const chunk of req) raw += chunk;
			const body = raw ? JSON.parse(raw) : undefined;
			if (body?.heartbeat !== undefined) {
				res.writeHead(422, { 'Content-Type': 'application/json' });
				return res.end(JSON.stringify({ error: { code: 'validation_error', message: 'request validation failed', details: { fields: { heartbeat: ['Unknown field.'] } } } }));
			}
			const up = await fetch(`${ledger.url}${req.url}`, { method: req.method, headers: { Authorization: req.headers.authorization, 'Content-Type': 'application/json' }, body: raw || undefined });
			res.writeHead(up.status, { 'Content-Type': 'application/json' });
			res.end(await up.text());
		});
		await new Promise((r) => older.listen(0, '127.0.0.1', r));
		try {
			const jobId = `older-ledger-${process.pid}`;
			const { out, calls } = await execution(jobId, [{ order: 7 }], { baseUrl: `http://127.0.0.1:${older.address().port}`, token: RUNNER_TOKEN });
			assert.equal(out[0].length, 1, JSON.stringify(out)); // Done, nothing refused
			assert.equal(committed(jobId), 1);
			const begins = ledgerCall(calls, '/v1/operations/begin');
			assert.equal(begins.length, 2);
			assert.equal(begins[1].body.heartbeat, undefined);
			assert.equal(ledgerCall(calls, '/confirm')[0].body.heartbeat, undefined);
			assert.deepEqual(renewals(calls).map((c) => c.body.live_s), [10, 3]);
			const left = await liveFor(jobId);
			assert.ok(left > 0 && left <= 3, `handed over: live ${left} s more`);
		} finally {
			older.close();
		}
	});
});
