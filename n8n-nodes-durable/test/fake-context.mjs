// A small fake of n8n's IExecuteFunctions: enough surface for the Durable Step node, with
// HTTP going over the network to the real ledger (the credential's authenticate block is
// applied the way n8n does: Authorization: Bearer <token>).
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
export const { DurableStep } = require('../dist/nodes/DurableStep/DurableStep.node.js');
export const { DurableLedgerApi } = require('../dist/credentials/DurableLedgerApi.credentials.js');
export const workflow = require('n8n-workflow');

function getPath(obj, dotted) {
	return dotted.split('.').reduce((o, k) => (o === undefined || o === null ? undefined : o[k]), obj);
}

/**
 * params: {name: value | (itemIndex, item) => value}; a function stands for an expression
 * evaluated per item. A function may throw, like an expression that cannot be resolved.
 */
/** A Wait node the ledger can resume, as getChildNodes reports it with includeNodeParameters. */
export const RESUMABLE_WAIT = {
	name: 'Wait',
	type: 'n8n-nodes-base.wait',
	typeVersion: 1.1,
	disabled: false,
	parameters: { resume: 'webhook', httpMethod: 'POST' },
};

/** One request as n8n's helpers send it (json or URLSearchParams body), answered like them. */
async function plainRequest(options) {
	const headers = { ...(options.headers ?? {}) };
	let body;
	if (options.body instanceof URLSearchParams) {
		headers['Content-Type'] = 'application/x-www-form-urlencoded';
		body = options.body.toString();
	} else if (options.body !== undefined) {
		headers['Content-Type'] = 'application/json';
		body = JSON.stringify(options.body);
	}
	const res = await fetch(options.url, {
		method: options.method,
		headers,
		body,
		signal: AbortSignal.timeout(options.timeout ?? 30000),
	});
	const text = await res.text();
	let parsed = text;
	try {
		parsed = text ? JSON.parse(text) : {};
	} catch {
		// leave as text
	}
	return { statusCode: res.status, body: parsed, headers: Object.fromEntries(res.headers) };
}

export function makeContext({
	items,
	params,
	credentials,
	continueOnFail = false,
	executionId = 'exec-1',
	workflowId = 'wf-1',
	childNodes = [RESUMABLE_WAIT],
	nodeVersion = 1,
	onError,
	httpError,
	workflows = {},
	mode = 'manual',
	credentialId, // as n8n's node.credentials names it: { durableLedgerApi: { id, name } }
	credentialReads = { count: 0 }, // shared by the nodes of one execution in a test
}) {
	const node = {
		id: 'node-1',
		name: 'Durable Step',
		type: 'n8n-nodes-durable.durableStep',
		typeVersion: nodeVersion,
		position: [0, 0],
		parameters: {},
		...(onError ? { onError } : {}),
		...(credentialId ? { credentials: { durableLedgerApi: { id: credentialId, name: 'Ledger' } } } : {}),
	};
	const calls = [];
	const hints = [];
	const subCalls = [];
	const ctx = {
		getMode: () => mode,
		/**
		 * n8n's executeWorkflow (2.40.7: (workflowInfo, inputData, parentCallbackManager, options) ->
		 * {executionId, data: [items of the last node's first output, ...]}), with a JS stand-in per
		 * workflow ID: workflows[id](jsonItems, {binary}) returns the last node's items (json objects)
		 * or throws, as a failed sub-execution does (n8n attaches the sub-execution's ID to the error).
		 */
		async executeWorkflow(info, inputData, _callbackManager, options) {
			const executionId = `sub-${subCalls.length + 1}`;
			subCalls.push({ id: info.id, input: inputData, options, executionId });
			const standIn = workflows[info.id];
			if (!standIn) throw Object.assign(new Error('Workflow does not exist.'), {});
			let out;
			try {
				out = await standIn(inputData.map((it) => it.json), inputData);
			} catch (error) {
				throw Object.assign(error, { executionId, workflowId: info.id });
			}
			if (out && out.waitTill) return { executionId, data: [out.items ?? []], waitTill: out.waitTill };
			return { executionId, data: [(out ?? []).map((json) => ({ json }))] };
		},
		getInputData: () => items,
		getNode: () => node,
		continueOnFail: () => continueOnFail,
		getExecutionId: () => executionId,
		getWorkflow: () => ({ id: workflowId, name: 'Test workflow', active: false }),
		getChildNodes: () => childNodes,
		addExecutionHints: (...h) => hints.push(...h),
		getNodeParameter(name, itemIndex, fallback) {
			let value = name in params ? params[name] : getPath(params, name);
			if (typeof value === 'function') value = value(itemIndex, items[itemIndex]);
			if (value === undefined) {
				if (arguments.length >= 3) return fallback;
				throw new Error(`Could not get parameter "${name}"`);
			}
			return value;
		},
		async getCredentials(name) {
			if (name !== 'durableLedgerApi') throw new Error(`unexpected credential ${name}`);
			credentialReads.count += 1;
			return credentials;
		},
		helpers: {
			// n8n's plain helper, for the remote of a Gated HTTP Request without authentication.
			async httpRequest(options) {
				return plainRequest(options);
			},
			// As n8n's: the credential given in `credentialsDecrypted`, else read again.
			async httpRequestWithAuthentication(credentialName, options, additional) {
				const creds = additional?.credentialsDecrypted?.data ?? (await ctx.getCredentials(credentialName));
				const headers = { ...(options.headers ?? {}), Authorization: `Bearer ${creds.token}` };
				if (options.body !== undefined) headers['Content-Type'] = 'application/json';
				// sentAt / answeredAt (performance.now()): which ledger calls were in flight together
				const call = { method: options.method, url: options.url, body: options.body, headers: options.headers, sentAt: performance.now() };
				calls.push(call);
				if (httpError) throw httpError(options); // as n8n's helper throws it (an AxiosError)
				const res = await fetch(options.url, {
					method: options.method,
					headers,
					body: options.body === undefined ? undefined : JSON.stringify(options.body),
					signal: AbortSignal.timeout(options.timeout ?? 30000),
				});
				const text = await res.text();
				call.answeredAt = performance.now();
				let body = text;
				try {
					body = text ? JSON.parse(text) : {};
				} catch {
					// leave as text
				}
				if (!options.ignoreHttpStatusErrors && res.status >= 400) {
					const err = new Error(`Request failed with status code ${res.status}`);
					err.response = { status: res.status, data: body };
					throw err;
				}
				return options.returnFullResponse
					? { statusCode: res.status, body, headers: Object.fromEntries(res.headers) }
					: body;
			},
		},
	};
	return { ctx, calls, node, hints, subCalls, credentialReads };
}

export async function runNode(options) {
	const { ctx, calls, hints, subCalls, credentialReads } = makeContext(options);
	const out = await new DurableStep().execute.call(ctx);
	return { out, calls, hints, subCalls, credentialReads: credentialReads.count };
}

/**
 * One Start Job node execution against the ledger of ``credentials``: runNode's answer. The lease
 * owner is ``owner`` if given, else the execution's (`n8n-exec-<execution>`, as n8n names it).
 */
export async function runStartJob(credentials, jobId, { version = 1, execution = 'exec-1', owner, taskVersion = 1, pipeline = 'generic', startOptions = {}, items = [{ json: {} }] } = {}) {
	return await runNode({
		items,
		credentials,
		nodeVersion: version,
		executionId: execution,
		params: { operation: 'startJob', jobId, taskVersion, pipeline, owner: owner ?? `n8n-exec-${execution}`, startOptions },
	});
}
