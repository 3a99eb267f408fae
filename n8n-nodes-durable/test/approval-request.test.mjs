// Issue 38, the node's side: Wait for Approval outputs the ledger's approval request for the
// builder's own sending node, the Wait node may sit anywhere downstream, the steps that begin send
// an Approval Policy only when one is set, and the step after the wait says who decided.
// A fake IExecuteFunctions, a REAL ledger service; the workflow graph is n8n-workflow's own.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { RESUMABLE_WAIT, runNode, workflow, runStartJob } from './fake-context.mjs';
import { APPROVER_TOKEN, RUNNER_TOKEN, startLedger } from './ledger.mjs';

let ledger;
let creds;
let seq = 0;
const uniqueJob = (name) => `${name}-${process.pid}-${++seq}`;
const RESUME = 'http://127.0.0.1:5678/webhook-waiting/38?signature=tok-38';

before(async () => {
	ledger = await startLedger();
	creds = { baseUrl: `${ledger.url}/`, token: RUNNER_TOKEN };
});
after(async () => {
	await ledger?.stop();
});

const one = (json = {}) => [{ json }];

async function startJob(jobId) {
	return (await runStartJob(creds, jobId, { owner: 'exec-A' })).out[0][0].json;
}

const beginParams = (jobId, token, extra = {}) => ({
	operation: 'beginStep',
	jobId,
	fencingToken: token,
	action: 'publish',
	payload: () => ({ post_id: 7, title: 'Durable automation' }),
	beginOptions: { requiresApproval: true, target: 'wordpress:default' },
	...extra,
});

async function halted(jobId, extra = {}) {
	const job = await startJob(jobId);
	const { out, calls } = await runNode({ items: one({ post_id: 7 }), credentials: creds, params: beginParams(jobId, job.fencing_token, extra) });
	assert.equal(out[2].length, 1, JSON.stringify(out));
	assert.equal(out[2][0].json.durable.reason, 'approval_required');
	return { item: out[2][0], job, calls };
}

const waitParams = (extra = {}) => ({
	operation: 'waitForApproval',
	operationKey: (i, item) => item.json.durable.operation_key,
	fencingToken: (i, item) => item.json.durable.fencing_token,
	resumeUrl: RESUME,
	...extra,
});

/**
 * What n8n's execution context answers for getChildNodes (n8n-core: the workflow's
 * getChildNodes(name), every node downstream at any depth, with its parameters), on a graph built
 * by n8n-workflow's Workflow class from these connections.
 */
function childNodesIn(graph, from = 'Wait for Approval') {
	const nodes = graph.nodes.map((n) => ({ position: [0, 0], typeVersion: 1, parameters: {}, ...n }));
	const connections = {};
	for (const [src, dst] of graph.edges) {
		connections[src] ??= { main: [[]] };
		connections[src].main[0].push({ node: dst, type: 'main', index: 0 });
	}
	const nodeTypes = { getByName: () => undefined, getByNameAndVersion: () => undefined, getKnownTypes: () => ({}) };
	const wf = new workflow.Workflow({ nodes, connections, active: false, nodeTypes });
	return wf.getChildNodes(from).map((name) => {
		const n = wf.nodes[name];
		return { name, type: n.type, typeVersion: n.typeVersion, disabled: n.disabled ?? false, parameters: n.parameters };
	});
}

const NODES = {
	step: { name: 'Publish', type: 'n8n-nodes-durable.durableStep' },
	approval: { name: 'Wait for Approval', type: 'n8n-nodes-durable.durableStep' },
	mail: { name: 'Send Approval Request', type: 'n8n-nodes-base.emailSend', typeVersion: 2.1 },
	slack: { name: 'Slack', type: 'n8n-nodes-base.slack', typeVersion: 2.3 },
	wait: { ...RESUMABLE_WAIT, name: 'Wait: Approver Decides' },
};

describe('the approval request on the item', () => {
	test('wait_for_approval_outputs_the_ledgers_request_for_any_sending_node', async () => {
		const jobId = uniqueJob('req');
		const { item } = await halted(jobId);
		const key = item.json.durable.operation_key;
		const { out, calls } = await runNode({
			items: [item],
			credentials: creds,
			executionId: '38',
			params: waitParams(),
			childNodes: childNodesIn({
				nodes: [NODES.step, NODES.approval, NODES.mail, NODES.wait],
				edges: [['Publish', 'Wait for Approval'], ['Wait for Approval', 'Send Approval Request'], ['Send Approval Request', 'Wait: Approver Decides'], ['Wait: Approver Decides', 'Publish']],
			}),
		});
		assert.equal(calls.length, 1);
		assert.equal('link_expires_in_s' in calls[0].body, false, 'no Link Expires After: the ledger default');
		const j = out[0][0].json;
		assert.equal(j.post_id, 7, 'the item passes through');
		const request = j.durable.approval_request;
		assert.ok(request && typeof request === 'object', JSON.stringify(j.durable));
		const a = j.approval;
		assert.match(a.link, /\/console\/a\/[^/?]+$/);
		assert.equal(a.link, request.link);
		assert.match(a.approve_link, /\/console\/a\/[^/?]+\?intent=approve$/);
		assert.match(a.deny_link, /\/console\/a\/[^/?]+\?intent=deny$/);
		assert.equal(a.expires_at, request.expires_at);
		assert.equal(a.summary.operation_key, key);
		assert.equal(a.summary.job_id, jobId);
		assert.equal(a.summary.action, 'publish');
		assert.match(a.summary.digest_prefix, /^[0-9a-f]{12}$/);
		assert.match(a.subject, new RegExp(`^Approval needed: .+ \\(job ${jobId}\\)$`));
		assert.ok(a.text.trim().endsWith(a.link), 'the plain text ends with the link');
		assert.ok(a.html.includes(a.link.replace(/&/g, '&amp;')), 'the HTML carries the link');
		// 72 h by default (the ledger's), within a minute.
		const left = Date.parse(a.expires_at) - Date.now();
		assert.ok(Math.abs(left - 72 * 3600e3) < 60e3, `expires in ${left} ms`);
		// Slack Block Kit: what the Slack node's "Blocks" field takes as {"blocks": [...]}.
		assert.ok(Array.isArray(a.slack_blocks) && a.slack_blocks.length <= 50);
		const buttons = a.slack_blocks.filter((b) => b.type === 'actions').flatMap((b) => b.elements);
		assert.ok(buttons.length >= 1 && buttons.every((b) => b.type === 'button' && /^https?:\/\//.test(b.url)), JSON.stringify(buttons));
		assert.ok(buttons.some((b) => b.url === a.link), 'a button opens the decision page');
		for (const b of a.slack_blocks) {
			if (b.type === 'header') assert.ok(b.text.type === 'plain_text' && b.text.text.length <= 150, JSON.stringify(b));
			if (b.type === 'section' && b.text) assert.ok(b.text.text.length <= 3000);
		}
		assert.ok(!JSON.stringify(j).includes('tok-38'), 'the resume token is never echoed');
	});

	test('link_expires_after_is_sent_in_seconds_and_bounded', async () => {
		const { item } = await halted(uniqueJob('exp'));
		const { out, calls } = await runNode({
			items: [item],
			credentials: creds,
			params: waitParams({ waitOptions: { linkExpiresAfterHours: 2 } }),
		});
		assert.equal(calls[0].body.link_expires_in_s, 7200);
		const left = Date.parse(out[0][0].json.approval.expires_at) - Date.now();
		assert.ok(Math.abs(left - 2 * 3600e3) < 60e3, `expires in ${left} ms`);
		for (const bad of [0, 721]) {
			await assert.rejects(
				runNode({ items: [item], credentials: creds, params: waitParams({ waitOptions: { linkExpiresAfterHours: bad } }) }),
				(err) => err instanceof workflow.NodeOperationError && /Link Expires After/.test(err.message),
			);
		}
	});
});

describe('the Wait node anywhere downstream', () => {
	const graphs = {
		// Wait for Approval -> Send Email -> Slack -> Wait: the request goes out twice, then it parks.
		twoSenders: {
			nodes: [NODES.approval, NODES.mail, NODES.slack, NODES.wait],
			edges: [['Wait for Approval', 'Send Approval Request'], ['Send Approval Request', 'Slack'], ['Slack', 'Wait: Approver Decides']],
		},
		noWait: { nodes: [NODES.approval, NODES.mail], edges: [['Wait for Approval', 'Send Approval Request']] },
		disabledWait: {
			nodes: [NODES.approval, NODES.mail, { ...NODES.wait, disabled: true }],
			edges: [['Wait for Approval', 'Send Approval Request'], ['Send Approval Request', 'Wait: Approver Decides']],
		},
		getWait: {
			nodes: [NODES.approval, NODES.mail, { ...NODES.wait, parameters: { resume: 'webhook' } }],
			edges: [['Wait for Approval', 'Send Approval Request'], ['Send Approval Request', 'Wait: Approver Decides']],
		},
		// A resumable Wait node upstream only (not downstream of Wait for Approval) parks nothing.
		waitUpstream: {
			nodes: [NODES.wait, NODES.approval, NODES.mail],
			edges: [['Wait: Approver Decides', 'Wait for Approval'], ['Wait for Approval', 'Send Approval Request']],
		},
	};

	test('a_wait_node_after_the_sending_nodes_is_accepted', async () => {
		const { item } = await halted(uniqueJob('down'));
		const childNodes = childNodesIn(graphs.twoSenders);
		assert.deepEqual(childNodes.map((c) => c.name).sort(), ['Send Approval Request', 'Slack', 'Wait: Approver Decides']);
		const { out, calls } = await runNode({ items: [item], credentials: creds, params: waitParams(), childNodes });
		assert.equal(calls.length, 1);
		assert.equal(out[0][0].json.durable.waiting_for, 'approval');
	});

	test('no_resumable_wait_node_downstream_is_a_clear_error_before_anything_is_registered', async () => {
		const { item } = await halted(uniqueJob('nowait'));
		const expect = {
			noWait: /Add a Wait node downstream of this node .*Resume: On Webhook Call with HTTP Method POST/,
			disabledWait: /"Wait: Approver Decides" downstream of this node is disabled/,
			getWait: /Set "Wait: Approver Decides" to Resume: On Webhook Call with HTTP Method POST/,
			waitUpstream: /Add a Wait node downstream/,
		};
		for (const [name, description] of Object.entries(expect)) {
			await assert.rejects(
				runNode({ items: [item], credentials: creds, params: waitParams(), childNodes: childNodesIn(graphs[name]) }),
				(err) => {
					assert.ok(err instanceof workflow.NodeOperationError, name);
					assert.equal(err.message, 'No Wait node downstream of this node can be resumed by the ledger', name);
					assert.match(err.description, description, name);
					return true;
				},
			);
		}
		const waits = await ledger.api('GET', `/v1/jobs/${encodeURIComponent(item.json.durable.job_id)}/waits`);
		assert.deepEqual(waits.body.waits, [], 'nothing registered');
	});
});

describe('the approval policy in the begin body', () => {
	test('nothing_is_sent_without_a_policy_and_the_policy_when_set', async () => {
		const plain = await halted(uniqueJob('nopol'));
		assert.equal('approval_policy' in plain.calls[0].body, false, JSON.stringify(plain.calls[0].body));
		const empty = await halted(uniqueJob('emptypol'), { approvalPolicy: {} });
		assert.equal('approval_policy' in empty.calls[0].body, false);
		assert.equal(empty.item.json.durable.operation.request_hash, plain.item.json.durable.operation.request_hash, 'the same digest');

		const set = await halted(uniqueJob('pol'), {
			approvalPolicy: { approvalsNeeded: 2, approvers: ' alice, bob ,carol', groups: 'editors', requesterMayApprove: false },
		});
		assert.deepEqual(set.calls[0].body.approval_policy, {
			approvals_needed: 2,
			approvers: ['alice', 'bob', 'carol'],
			groups: ['editors'],
			requester_may_approve: false,
		});
		// The ledger stored it with the operation (at its first begin) and shows it.
		const key = encodeURIComponent(set.item.json.durable.operation_key);
		const shown = await ledger.api('GET', `/v1/operations/${key}/approvals`);
		assert.equal(shown.status, 200, JSON.stringify(shown.body));
		assert.equal(shown.body.policy.approvals_needed, 2, JSON.stringify(shown.body.policy));
		assert.deepEqual(shown.body.policy.approvers, ['alice', 'bob', 'carol']);
		assert.equal(shown.body.policy.requester_may_approve, false);
		const none = await ledger.api('GET', `/v1/operations/${encodeURIComponent(plain.item.json.durable.operation_key)}/approvals`);
		assert.equal(none.body.policy.approvals_needed, 1, 'no policy: one approval by any approver');
	});

	test('the_one_node_operations_send_it_too_and_a_policy_makes_the_step_approval_bound', async () => {
		const jobId = uniqueJob('gpol');
		const job = await startJob(jobId);
		const gated = {
			operation: 'gatedRequest',
			jobId,
			fencingToken: job.fencing_token,
			action: 'publish',
			method: 'POST',
			url: 'http://127.0.0.1:9/never-sent',
			authentication: 'none',
			bodyType: 'json',
			jsonBody: () => ({ post_id: 7 }),
			remoteIdPath: 'id',
			receiptFields: '',
			lookUp: false,
			needsAttention: 'route',
			gateOptions: { requiresApproval: true, timeout: 500 },
			approvalPolicy: { approvalsNeeded: 3 },
		};
		const { out, calls } = await runNode({ items: one(), credentials: creds, nodeVersion: 1.2, params: gated });
		assert.equal(calls[0].body.approval_policy.approvals_needed, 3, JSON.stringify(calls[0].body));
		assert.equal(out.flat()[0].json.durable.reason, 'approval_required');

		// A policy without Requires Approval: the step needs approval all the same (the ledger's rule).
		const params = beginParams(jobId, job.fencing_token, { action: 'other', beginOptions: {}, approvalPolicy: { approvers: 'alice' } });
		const bound = await runNode({ items: one(), credentials: creds, params });
		assert.equal(bound.calls[0].body.requires_approval, true);
		assert.deepEqual(bound.calls[0].body.approval_policy, { approvers: ['alice'] });
		assert.equal(bound.out[2][0].json.durable.reason, 'approval_required');
		await assert.rejects(
			runNode({ items: one(), credentials: creds, params: { ...params, action: 'third', approvalPolicy: { approvalsNeeded: 11 } } }),
			(err) => err instanceof workflow.NodeOperationError && /Approvals Needed/.test(err.message),
		);
	});
});

describe('who decided, after the wait', () => {
	test('the_step_after_the_wait_carries_decided_by_from_the_resume_call', async () => {
		const jobId = uniqueJob('who');
		const { item, job } = await halted(jobId);
		const key = item.json.durable.operation_key;
		const digest = item.json.durable.operation.request_hash;
		const approved = await ledger.api('POST', `/v1/operations/${encodeURIComponent(key)}/approve`, { content_digest: digest }, APPROVER_TOKEN);
		assert.ok([200, 201].includes(approved.status), JSON.stringify(approved.body));
		const decidedBy = [{ name: 'alice', decision: 'approved', at: '2026-12-07T14:00:00Z', door: 'link' }];
		// The Wait node's item: the ledger's resume call as n8n's webhook gives it.
		const resumed = (operationKey) => ({
			json: { headers: {}, params: {}, query: {}, body: { decision: 'approved', reason: null, operation_key: operationKey, decided_by: decidedBy } },
		});
		const params = beginParams(jobId, job.fencing_token);
		const { out } = await runNode({ items: [resumed(key)], credentials: creds, params });
		assert.equal(out[0].length, 1, JSON.stringify(out));
		assert.deepEqual(out[0][0].json.durable.decided_by, decidedBy);
		// Another step's resume call says nothing about this one (a step still waiting here).
		const waiting = await halted(uniqueJob('who-other'));
		const again = beginParams(waiting.item.json.durable.job_id, waiting.job.fencing_token);
		const other = await runNode({ items: [resumed(key)], credentials: creds, params: again });
		const durable = other.out[2][0].json.durable;
		assert.equal(durable.reason, 'approval_required');
		assert.equal(durable.decided_by, undefined);
	});
});

/**
 * n8n's own Slack node (n8n-nodes-base, from the n8n that stack/n8n.sh installed), with no Slack
 * workspace: its execute() runs on a fake context that answers chat.postMessage, so the test sees
 * the request body the node builds from the parameters a builder sets after Wait for Approval.
 */
function slackNode() {
	const cache = process.env.DURABLE_CACHE || path.join(process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache'), 'durable-steps');
	const home = path.join(cache, `n8n-${process.env.N8N_VERSION || '2.40.7'}`);
	const file = path.join(home, 'node_modules', 'n8n-nodes-base', 'dist', 'nodes', 'Slack', 'V2', 'SlackV2.node.js');
	if (!fs.existsSync(path.join(home, '.complete')) || !fs.existsSync(file)) return null;
	return createRequire(file)(file).SlackV2;
}

describe('the Slack node with the approval request', () => {
	const SlackV2 = slackNode();
	test('the_slack_node_posts_the_blocks_a_builder_maps_from_the_item', { skip: !SlackV2 && 'n8n is not installed (make n8n-install)' }, async () => {
		const { item } = await halted(uniqueJob('slack'));
		const { out } = await runNode({ items: [item], credentials: creds, params: waitParams() });
		const json = out[0][0].json;
		// The Slack node's fields as the docs tell a builder to set them (Send Message, Blocks).
		const expressions = {
			authentication: 'accessToken',
			resource: 'message',
			operation: 'post',
			select: 'channel',
			channelId: { __rl: true, mode: 'id', value: 'C0APPROVERS' },
			messageType: 'block',
			blocksUi: ($json) => JSON.stringify({ blocks: $json.approval.slack_blocks }), // {{ JSON.stringify({ blocks: $json.approval.slack_blocks }) }}
			text: ($json) => $json.approval.text, // {{ $json.approval.text }}
			otherOptions: { includeLinkToWorkflow: false },
		};
		const sent = [];
		const ctx = {
			getInputData: () => [{ json }],
			getNode: () => ({ name: 'Slack', type: 'n8n-nodes-base.slack', typeVersion: 2.3, parameters: {} }),
			getInstanceId: () => 'instance-1',
			getWorkflow: () => ({ id: 'wf1', name: 'Article pipeline', active: false }),
			getInstanceBaseUrl: () => 'http://127.0.0.1:5678/',
			continueOnFail: () => false,
			getNodeParameter(name, i, fallback, options = {}) {
				const [head, ...rest] = name.split('.');
				let value = expressions[head];
				for (const k of rest) value = value?.[k];
				if (typeof value === 'function') value = value(json);
				if (value === undefined) return fallback;
				if (options.extractValue && value?.__rl) return value.value;
				if (options.ensureType === 'object' && typeof value === 'string') return JSON.parse(value); // as n8n validates it
				return structuredClone(value);
			},
			helpers: {
				async requestWithAuthentication(credentialType, options) {
					sent.push({ credentialType, ...options });
					return { ok: true, channel: 'C0APPROVERS', ts: '1765000000.000100', message: { text: options.body.text } };
				},
				returnJsonArray: (data) => (Array.isArray(data) ? data : [data]).map((d) => ({ json: d })),
				constructExecutionMetaData: (items, { itemData }) => items.map((it) => ({ ...it, pairedItem: itemData })),
			},
		};
		const result = await new SlackV2({ displayName: 'Slack', name: 'slack' }).execute.call(ctx);
		assert.equal(sent.length, 1);
		assert.equal(sent[0].uri, 'https://slack.com/api/chat.postMessage');
		assert.equal(sent[0].credentialType, 'slackApi');
		assert.equal(sent[0].body.channel, 'C0APPROVERS');
		assert.deepEqual(sent[0].body.blocks, json.approval.slack_blocks, 'the blocks as the ledger built them');
		assert.equal(sent[0].body.text, json.approval.text, 'the notification text (and the fallback of clients without blocks)');
		const urls = JSON.stringify(sent[0].body.blocks);
		assert.ok(urls.includes(json.approval.link) && urls.includes(json.approval.approve_link));
		assert.equal(result[0].length, 1);
	});
});
