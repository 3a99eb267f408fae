// Node version 1.5 (issue 37, parts 5 and A): a workflow built in the editor works with the
// defaults. The gated node finds its job whatever the Start Job node is named, a Done Before item
// leaves by Done with the same fields as Done, a duplicate past Wait for Live Holder leaves by
// Running Elsewhere (green, nothing written), and a failure the next run's Look Up settles does not
// send anyone to the review queue. A fake IExecuteFunctions, a REAL ledger and a local remote.
import assert from 'node:assert/strict';
import http from 'node:http';
import { createRequire } from 'node:module';
import { after, before, describe, test } from 'node:test';
import { runNode, runStartJob } from './fake-context.mjs';
import { RUNNER_TOKEN, startLedger } from './ledger.mjs';

const require = createRequire(import.meta.url);
const { configuredOutputs } = require('../dist/nodes/DurableStep/outputs.js');
const { receiptOf, receiptPaths, MAX_WHOLE_RECEIPT_BYTES } = require('../dist/nodes/DurableStep/operations/gated/receipt.js');

let ledger;
let creds;
let remote;
let seq = 0;
const uniqueJob = (name) => `${name}-${process.pid}-${++seq}`;

/** POST /orders: commits (counted) and answers the order; /orders/fail500: commits, then 500. */
function startRemote() {
	const commits = [];
	const server = http.createServer((req, res) => {
		let raw = '';
		req.on('data', (c) => (raw += c));
		req.on('end', () => {
			const key = req.headers['idempotency-key'];
			if (req.method === 'GET') {
				const found = commits.filter((c) => c.idempotency_key === new URL(req.url, 'http://x').searchParams.get('key'));
				res.writeHead(200, { 'Content-Type': 'application/json' });
				return res.end(JSON.stringify(found));
			}
			const order = { id: `ord-${commits.length + 1}`, idempotency_key: key, total: 42, lines: [{ sku: 'A', qty: 2 }] };
			commits.push(order);
			res.writeHead(req.url.endsWith('/fail500') ? 500 : 201, { 'Content-Type': 'application/json' });
			res.end(JSON.stringify(req.url.endsWith('/fail500') ? { error: 'committed, then failed' } : order));
		});
	});
	return new Promise((resolve) =>
		server.listen(0, '127.0.0.1', () => resolve({ commits, url: `http://127.0.0.1:${server.address().port}`, close: () => server.close() })),
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

const written = (jobId) => remote.commits.filter((c) => c.idempotency_key?.includes(`:${jobId}:`)).length;

async function startJob(jobId, owner, startOptions = {}) {
	const items = [{ json: { body: { order_id: jobId } } }];
	return (await runStartJob(creds, jobId, { version: 1.5, execution: owner, startOptions, items })).out;
}

/** Gated HTTP Request as the node search adds it: only the action, the URL and the body set. */
const editorGated = (path = '/orders', extra = {}) => ({
	operation: 'gatedRequest',
	action: 'create_order',
	method: 'POST',
	url: `${remote.url}${path}`,
	authentication: 'none',
	bodyType: 'json',
	jsonBody: () => ({ order: 7 }),
	...extra,
});

async function gated(item, owner, params = editorGated()) {
	const { out } = await runNode({ items: [item], credentials: creds, nodeVersion: 1.5, executionId: owner, params });
	return out.map((o) => o.map((x) => x.json));
}

const withoutDurable = ({ durable, ...fields }) => fields;

describe('node 1.5: a workflow built in the editor works with the defaults', () => {
	test('outputs_of_1_5_start_job_has_running_elsewhere_gated_one_done_output_1_4_unchanged', () => {
		const names = (p, v) => configuredOutputs(p, v).map((o) => o.displayName ?? '(main)');
		assert.deepEqual(names({ operation: 'startJob' }, 1.5), ['(main)', 'Running Elsewhere']);
		assert.deepEqual(names({ operation: 'startJob' }, 1.4), ['(main)']);
		assert.deepEqual(names({ operation: 'gatedRequest' }, 1.5), ['Done']);
		assert.deepEqual(names({ operation: 'gatedRequest', doneBefore: 'separate' }, 1.5), ['Done', 'Done Before']);
		assert.deepEqual(names({ operation: 'gatedRequest' }, 1.4), ['Done', 'Done Before']);
	});

	test('the_gated_node_finds_its_job_on_the_item_done_then_done_before_with_the_same_fields', async () => {
		const jobId = uniqueJob('editor');
		const first = await startJob(jobId, '101');
		const [done] = await gated(first[0][0], '101');
		assert.equal(done.length, 1);
		assert.equal(done[0].durable.decision, 'recorded');
		const second = await startJob(jobId, '102');
		const [again] = await gated(second[0][0], '102');
		assert.equal(again.length, 1, 'Done Before leaves by Done');
		assert.equal(again[0].durable.decision, 'reuse_receipt');
		assert.deepEqual(withoutDurable(again[0]), withoutDurable(done[0]), 'the same fields either way');
		assert.equal(written(jobId), 1);
	});

	test('the_job_is_also_found_on_the_durable_fields_of_an_earlier_durable_step_item', async () => {
		const jobId = uniqueJob('chain');
		const started = await startJob(jobId, '111');
		const [done] = await gated(started[0][0], '111');
		// a second gated step after the first: its input is the first one's Done item
		const [next] = await gated({ json: done[0] }, '111', editorGated('/orders', { action: 'notify' }));
		assert.equal(next[0].durable.job_id, jobId);
		assert.equal(next[0].durable.fencing_token, started[0][0].json.fencing_token);
	});

	test('without_a_start_job_the_node_says_what_to_add', async () => {
		await assert.rejects(gated({ json: { order: 7 } }, '121'), (error) => {
			assert.match(error.message, /No job for this item: no Start Job before "Durable Step"/);
			assert.match(error.description, /Start Job/);
			return true;
		});
	});

	test('a_duplicate_past_the_wait_leaves_by_running_elsewhere_green_and_writes_nothing', async () => {
		const jobId = uniqueJob('elsewhere');
		const holder = await startJob(jobId, '131'); // live for 10 s from its start
		const began = Date.now();
		const dup = await startJob(jobId, '132', { waitForHolderS: 1 });
		assert.ok(Date.now() - began >= 1000);
		assert.deepEqual(dup.map((o) => o.length), [0, 1]);
		const item = dup[1][0].json;
		assert.equal(item.status, 'running_elsewhere');
		assert.equal(item.running_elsewhere.owner, 'n8n-exec-131');
		assert.equal(item.running_elsewhere.fencing_token, holder[0][0].json.fencing_token);
		assert.ok(item.running_elsewhere.waited_s >= 1);
		// the holder was not fenced out
		const [done] = await gated(holder[0][0], '131');
		assert.equal(done.length, 1);
	});

	test('receipt_is_the_whole_answer_unless_too_large_or_narrowed', () => {
		const body = { id: 'o1', total: 3, nested: { a: 1 } };
		assert.deepEqual(receiptOf(body, receiptPaths('id', '', true)), body);
		assert.deepEqual(receiptOf(body, receiptPaths('id', 'total', true)), { id: 'o1', total: 3 });
		assert.deepEqual(receiptOf(body, receiptPaths('id', '', false)), { id: 'o1' });
		const large = { id: 'o2', blob: 'é'.repeat(MAX_WHOLE_RECEIPT_BYTES / 6 + 1) };
		assert.deepEqual(receiptOf(large, receiptPaths('id', '', true)), { id: 'o2' });
	});

	test('with_look_up_on_the_first_failure_says_no_one_needs_to_act', async () => {
		const jobId = uniqueJob('settles');
		const started = await startJob(jobId, '141');
		const params = editorGated('/orders/fail500', {
			lookUp: true,
			lookUpUrl: `${remote.url}/orders?key={operation_key}`,
			lookUpMatchField: 'idempotency_key',
		});
		await assert.rejects(gated(started[0][0], '141', params), (error) => {
			assert.match(error.message, /^outcome_unknown: /);
			assert.doesNotMatch(`${error.message} ${error.description}`, /review/);
			assert.match(error.description, /No one needs to act/);
			return true;
		});
		const again = await startJob(jobId, '142');
		const [done] = await gated(again[0][0], '142', params);
		assert.equal(done[0].durable.decision, 'reuse_receipt', 'the next run settles it: Done Before');
		assert.equal(written(jobId), 1);
	});
});
