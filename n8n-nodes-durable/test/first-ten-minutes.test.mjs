// The defaults and messages a builder meets first (node version 1.2): the Payload default, a
// loud Needs Attention, the credential test, the port, names and order, the unreachable ledger.
// A fake IExecuteFunctions, a REAL ledger service.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { DurableLedgerApi, DurableStep, runNode, runStartJob } from './fake-context.mjs';
import { APPROVER_TOKEN, EDITOR_TOKEN, OTHER_TENANT_RUNNER_TOKEN, RUNNER_TOKEN, TENANT, startLedger } from './ledger.mjs';

const require = createRequire(import.meta.url);
const { configuredOutputs } = require('../dist/nodes/DurableStep/outputs.js');
const { SUBTITLE } = require('../dist/nodes/DurableStep/description.js');
const HERE = path.dirname(fileURLToPath(import.meta.url));
const README = fs.readFileSync(path.join(HERE, '..', 'README.md'), 'utf8');

const V = 1.2;
let ledger;
let creds;
let seq = 0;
const uniqueJob = (name) => `${name}-${process.pid}-${++seq}`;

before(async () => {
	ledger = await startLedger();
	creds = { baseUrl: ledger.url, token: RUNNER_TOKEN };
});
after(async () => {
	await ledger?.stop();
});

/** Start Job with its defaults (owner = this execution), as a new 1.2 node has them. */
async function startJob(jobId, executionId) {
	return (await runStartJob(creds, jobId, { version: V, execution: executionId, startOptions: { takeover: true } })).out[0][0];
}

/** Begin Step right after Start Job with nothing set but Action (the 1.2 defaults). */
function beginDefaults(startItem, extra = {}) {
	return {
		operation: 'beginStep',
		jobId: startItem.json.job_id,
		fencingToken: startItem.json.fencing_token,
		action: 'send_invoice',
		beginOptions: {},
		...extra,
	};
}

describe('payload default (1.2)', () => {
	test('default_payload_after_start_job_leaves_out_the_lease_so_a_rerun_is_already_done', async () => {
		const jobId = uniqueJob('payload');
		const first = await startJob(jobId, '101');
		const run1 = await runNode({ items: [first], credentials: creds, nodeVersion: V, executionId: '101', params: beginDefaults(first) });
		assert.equal(run1.out[0].length, 1, 'first run: Proceed');
		assert.deepEqual(run1.calls[0].body.payload, {}, 'nothing of Start Job in the payload');
		const key = run1.out[0][0].json.durable.operation_key;
		await ledger.api('POST', `/v1/operations/${encodeURIComponent(key)}/confirm`, { fencing_token: first.json.fencing_token, remote_id: 'inv-1' });
		// The next execution: a new lease, a new token, a new owner; the payload digest is the same.
		const second = await startJob(jobId, '102');
		assert.notEqual(second.json.fencing_token, first.json.fencing_token);
		const run2 = await runNode({ items: [second], credentials: creds, nodeVersion: V, executionId: '102', params: beginDefaults(second) });
		assert.deepEqual(run2.out.map((o) => o.length), [0, 1], 'second run: Already Done (no digest_mismatch)');
		assert.equal(run2.out[1][0].json.durable.remote_id, 'inv-1');
	});

	test('default_payload_keeps_business_fields_and_drops_durable', async () => {
		const jobId = uniqueJob('payload-business');
		const start = await startJob(jobId, '103');
		const item = { json: { order: 1042, total: 99, durable: { fencing_token: 5, operation_key: 'k' } } };
		const { calls } = await runNode({ items: [item], credentials: creds, nodeVersion: V, params: beginDefaults(start) });
		assert.deepEqual(calls[0].body.payload, { order: 1042, total: 99 });
	});

	test('a_payload_holding_the_lease_fails_in_1_2_and_warns_in_1', async () => {
		const jobId = uniqueJob('payload-volatile');
		const start = await startJob(jobId, '104');
		const params = beginDefaults(start, { payloadSource: 'custom', payload: (i, it) => it.json });
		await assert.rejects(
			runNode({ items: [start], credentials: creds, nodeVersion: V, executionId: '104', params }),
			(err) => {
				assert.equal(err.name, 'NodeOperationError');
				assert.match(err.message, /^The Payload holds fencing_token, lease, job, which Durable Step produced/);
				assert.match(err.message, /digest_mismatch/);
				assert.match(err.description, /Input Item Without Durable Step Fields/);
				return true;
			},
		);
		const old = await runNode({ items: [start], credentials: creds, nodeVersion: 1, executionId: '104', params });
		assert.equal(old.out[0].length, 1, 'version 1 keeps its behaviour: dispatched');
		assert.equal(old.hints.length, 1);
		assert.equal(old.hints[0].type, 'warning');
		assert.match(old.hints[0].message, /fencing_token, lease, job/);
	});

	test('the_execution_id_in_a_payload_is_named', async () => {
		const jobId = uniqueJob('payload-exec');
		const start = await startJob(jobId, '105');
		const params = beginDefaults(start, { payloadSource: 'custom', payload: { owner: 'n8n-exec-105', title: 'x' } });
		await assert.rejects(runNode({ items: [start], credentials: creds, nodeVersion: V, executionId: '105', params }), /holds owner,/);
	});

	test('payload_fields_per_version', () => {
		const props = new DurableStep().description.properties;
		const payloadFields = (operation) =>
			props.filter((p) => (p.name === 'payload' || p.name === 'payloadSource') && p.displayOptions.show.operation.includes(operation));
		const fields = payloadFields('beginStep');
		// Gated Sub-workflow (1.2 only): the same two fields, its own copies.
		assert.deepEqual(
			payloadFields('gatedSubworkflow').map((f) => [f.name, f.default, f.displayOptions.show.payloadSource]),
			[
				['payloadSource', 'item', undefined],
				['payload', '{}', ['custom']],
			],
		);
		assert.deepEqual(
			fields.map((f) => [f.name, f.default, JSON.stringify(f.displayOptions.show['@version']), f.displayOptions.show.payloadSource]),
			[
				['payload', '={{ $json }}', '[1,1.1]', undefined],
				['payloadSource', 'item', '[{"_cnd":{"gte":1.2}}]', undefined],
				['payload', '{}', '[{"_cnd":{"gte":1.2}}]', ['custom']],
			],
		);
	});
});

describe('needs attention (1.2)', () => {
	test('outputs_without_and_with_the_needs_attention_output', () => {
		const names = (p, v) => configuredOutputs(p, v).map((o) => o.displayName ?? '(main)');
		assert.deepEqual(names({ operation: 'beginStep' }, V), ['Proceed', 'Done Before']);
		assert.deepEqual(names({ operation: 'beginStep', needsAttention: 'route' }, V), ['Proceed', 'Done Before', 'Attention']);
		assert.deepEqual(names({ operation: 'beginStep', beginOptions: { routeToLookUp: true } }, V), ['Proceed', 'Done Before', 'Look Up']);
		assert.deepEqual(names({ operation: 'recordOutcome' }, V), ['Done']);
		assert.deepEqual(names({ operation: 'recordOutcome', needsAttention: 'route' }, V), ['Done', 'Attention']);
		assert.deepEqual(names({ operation: 'reportLookup' }, V), ['Proceed', 'Done Before']);
		// Saved workflows: 1 and 1.1 keep the output, whatever the parameter.
		assert.deepEqual(names({ operation: 'beginStep', needsAttention: 'fail' }, 1.1), ['Proceed', 'Done Before', 'Attention']);
		const field = new DurableStep().description.properties.find((p) => p.name === 'needsAttention');
		assert.equal(field.default, 'fail');
		assert.deepEqual(field.displayOptions.show['@version'], [{ _cnd: { gte: 1.2 } }]);
	});

	test('digest_mismatch_fails_the_execution_and_names_the_job_page', async () => {
		const jobId = uniqueJob('attention-digest');
		const start = await startJob(jobId, '201');
		await runNode({ items: [{ json: { total: 1 } }], credentials: creds, nodeVersion: V, params: beginDefaults(start) });
		await assert.rejects(
			runNode({ items: [{ json: { total: 2 } }], credentials: creds, nodeVersion: V, params: beginDefaults(start) }),
			(err) => {
				assert.equal(err.name, 'NodeOperationError');
				assert.match(err.message, /^digest_mismatch: /);
				assert.ok(err.description.includes(`${ledger.url}/console/jobs/${jobId}`), err.description);
				assert.match(err.description, /"Route to an Output"/);
				assert.equal(err.context.itemIndex, 0);
				return true;
			},
		);
	});

	test('approval_required_fails_and_names_the_approval_page', async () => {
		const jobId = uniqueJob('attention-approval');
		const start = await startJob(jobId, '202');
		const params = beginDefaults(start, { beginOptions: { requiresApproval: true } });
		await assert.rejects(runNode({ items: [start], credentials: creds, nodeVersion: V, params }), (err) => {
			assert.match(err.message, /^approval_required: /);
			const key = encodeURIComponent(`${TENANT}:${jobId}:v1:send_invoice`);
			assert.ok(err.description.includes(`${ledger.url}/console/approvals/${key}`), err.description);
			assert.match(err.description, /sign in as an approver/);
			return true;
		});
		const routed = await runNode({ items: [start], credentials: creds, nodeVersion: V, params: { ...params, needsAttention: 'route' } });
		assert.deepEqual(routed.out.map((o) => o.length), [0, 0, 1], 'with the opt-in: the Needs Attention output');
		assert.equal(routed.out[2][0].json.durable.reason, 'approval_required');
	});

	test('with_continue_on_fail_the_item_is_an_error_item_never_on_proceed', async () => {
		const jobId = uniqueJob('attention-continue');
		const start = await startJob(jobId, '203');
		const params = beginDefaults(start, { beginOptions: { requiresApproval: true } });
		const errOut = await runNode({ items: [start], credentials: creds, nodeVersion: V, params, continueOnFail: true, onError: 'continueErrorOutput' });
		// n8n moves items shaped {error, details} from any output to the error output.
		assert.deepEqual(Object.keys(errOut.out[0][0].json).sort(), ['details', 'error']);
		assert.match(errOut.out[0][0].json.error, /^approval_required: /);
		const regular = await runNode({ items: [start], credentials: creds, nodeVersion: V, params, continueOnFail: true, onError: 'continueRegularOutput' });
		assert.deepEqual(regular.out.map((o) => o.length), [0, 0], 'no output is safe: left out');
		assert.match(regular.hints[0].message, /on no output/);
	});

	test('version_1_1_still_routes_needs_attention', async () => {
		const jobId = uniqueJob('attention-old');
		const start = await startJob(jobId, '204');
		const params = beginDefaults(start, { beginOptions: { requiresApproval: true }, payload: {} });
		const { out } = await runNode({ items: [start], credentials: creds, nodeVersion: 1.1, params });
		assert.deepEqual(out.map((o) => o.length), [0, 0, 1]);
	});
});

/** n8n's credential tester on our test request: the request, then the rules in their order. */
async function credentialTest(credential) {
	const { request, rules } = new DurableLedgerApi().test;
	assert.equal(request.baseURL, '={{$credentials.baseUrl.replace(/\\/+$/, "")}}');
	const url = new URL(`${credential.baseUrl.replace(/\/+$/, '')}${request.url}`);
	assert.deepEqual(request.qs, { tenant: '={{$credentials.tenant}}' });
	url.searchParams.set('tenant', credential.tenant ?? '');
	const res = await fetch(url, { headers: { Authorization: `Bearer ${credential.token}` } });
	if (!res.ok) {
		const rule = rules.find((r) => r.type === 'responseCode' && r.properties.value === res.status);
		return { status: 'Error', message: rule ? rule.properties.message : res.statusText };
	}
	const body = await res.json();
	const rule = rules.find((r) => r.type === 'responseSuccessBody' && body[r.properties.key] === r.properties.value);
	return rule ? { status: 'Error', message: rule.properties.message } : { status: 'OK' };
}

describe('credential', () => {
	test('default_base_url_is_the_port_serve_listens_on', () => {
		const baseUrl = new DurableLedgerApi().properties.find((p) => p.name === 'baseUrl');
		assert.equal(baseUrl.default, 'http://127.0.0.1:8787');
		assert.ok(README.includes('http://127.0.0.1:8787'));
		assert.ok(!README.includes('8700'));
	});

	test('a_runner_token_passes_approver_editor_wrong_tenant_and_wrong_token_fail_saying_why', async () => {
		assert.deepEqual(await credentialTest({ baseUrl: `${ledger.url}/`, token: RUNNER_TOKEN }), { status: 'OK' });
		assert.deepEqual(await credentialTest({ baseUrl: ledger.url, token: RUNNER_TOKEN, tenant: TENANT }), { status: 'OK' });
		const approver = await credentialTest({ baseUrl: ledger.url, token: APPROVER_TOKEN });
		assert.equal(approver.status, 'Error');
		assert.match(approver.message, /^This is an approver's token: .* not run workflows\. The Durable Step node needs a runner token/);
		assert.match((await credentialTest({ baseUrl: ledger.url, token: EDITOR_TOKEN })).message, /^This is an editor's token/);
		const other = await credentialTest({ baseUrl: ledger.url, token: OTHER_TENANT_RUNNER_TOKEN, tenant: TENANT });
		assert.match(other.message, /another tenant/);
		assert.match((await credentialTest({ baseUrl: ledger.url, token: 'nope' })).message, /^The ledger refused this token \(401/);
		assert.match((await credentialTest({ baseUrl: `${ledger.url}/v1`, token: RUNNER_TOKEN })).message, /\(404\)/);
	});
});

describe('names and order', () => {
	test('start_job_first_and_one_name_in_the_list_the_action_and_the_subtitle', () => {
		const op = new DurableStep().description.properties.find((p) => p.name === 'operation');
		assert.deepEqual(
			op.options.map((o) => o.name),
			['Start Job', 'Gated HTTP Request', 'Gated Sub-Workflow', 'Begin Step', 'Record Outcome', 'Save Checkpoint', 'Wait for Approval', 'Report Lookup', 'Reconcile'],
		);
		for (const o of op.options) assert.equal(o.action, o.name);
		assert.equal(op.default, 'beginStep', 'unchanged: saved workflows omit the default');
		const subtitle = (parameter) => new Function('$parameter', `return ${SUBTITLE.slice(3, -2)};`)(parameter);
		assert.equal(subtitle({ operation: 'startJob' }), 'Start Job');
		assert.equal(subtitle({ operation: 'beginStep', action: 'send_invoice' }), 'Begin Step: send_invoice');
		assert.equal(subtitle({ operation: 'recordOutcome' }), 'Record Outcome');
		assert.equal(subtitle({ operation: 'gatedRequest', action: 'create_order' }), 'Gated HTTP Request: create_order');
		assert.equal(subtitle({ operation: 'gatedSubworkflow', action: 'insert_row' }), 'Gated Sub-Workflow: insert_row');
		for (const name of ['Start Job', 'Begin Step', 'Record Outcome']) assert.ok(README.includes(`**${name}**`), name);
	});

	test('output_labels_fit_the_canvas_and_map_back_to_their_routes', () => {
		// Measured in n8n 2.40.7's canvas: about 76 px of 12 px text next to a node; "Already Done"
		// took 77 px ("Already Do..."), "Needs Attention" 91; "Done Before" takes 71, "Attention" 51.
		const { OUTPUT_ROUTES } = require('../dist/nodes/DurableStep/outputs.js');
		const seen = new Set();
		for (const operation of ['beginStep', 'reportLookup', 'recordOutcome', 'startJob']) {
			for (const version of [1, 1.1, 1.2]) {
				for (const needsAttention of ['fail', 'route']) {
					for (const o of configuredOutputs({ operation, needsAttention, beginOptions: { routeToLookUp: true } }, version)) {
						if (o.displayName) seen.add(o.displayName);
					}
				}
			}
		}
		assert.deepEqual([...seen].sort(), ['Attention', 'Done', 'Done Before', 'Look Up', 'Proceed']);
		for (const label of seen) assert.ok(label.length <= 11 && OUTPUT_ROUTES[label], label);
		assert.equal(OUTPUT_ROUTES['Done Before'], 'Already Done');
		assert.equal(OUTPUT_ROUTES.Attention, 'Needs Attention');
	});

	test('placeholders_are_neutral', () => {
		const text = JSON.stringify(new DurableStep().description.properties);
		assert.doesNotMatch(text, /create_draft|wordpress|article-42/i);
	});
});

describe('errors as documented', () => {
	test('an_unreachable_ledger_is_ledger_unreachable_also_for_an_axios_style_error', async () => {
		// n8n's request helper throws an AxiosError with code ECONNREFUSED; NodeApiError replaces
		// a message or code naming ECONNREFUSED with its own generic text.
		const refused = () => Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:8787'), { code: 'ECONNREFUSED', name: 'AxiosError' });
		await assert.rejects(
			runNode({
				items: [{ json: {} }],
				credentials: { baseUrl: 'http://127.0.0.1:8787', token: 't' },
				nodeVersion: V,
				httpError: refused,
				params: { operation: 'startJob', jobId: 'j', taskVersion: 1, pipeline: 'generic', owner: 'o', startOptions: {} },
			}),
			(err) => {
				assert.equal(err.name, 'NodeApiError');
				assert.equal(err.message, 'ledger_unreachable: POST /v1/jobs/j/start got no answer from http://127.0.0.1:8787 (connection refused: is the ledger running on that host and port?)');
				assert.match(err.description, /port 8787/);
				return true;
			},
		);
		assert.ok(README.includes('`ledger_unreachable: POST /v1/jobs/order-1042/start got no answer from http://127.0.0.1:8787 (connection refused'));
	});
});
