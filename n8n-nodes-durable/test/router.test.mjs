// The node's router: every operation of the Operation field is looked up in one table and run
// through the same interface; the router itself knows no operation by name.
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { describe, test } from 'node:test';
import { DurableStep, makeContext, workflow } from './fake-context.mjs';

const require = createRequire(import.meta.url);
const { OPERATIONS } = require('../dist/nodes/DurableStep/operations/index.js');

const selectorValues = () =>
	new DurableStep().description.properties.find((p) => p.name === 'operation').options.map((o) => o.value);

/** Runs the node with OPERATIONS[name] replaced by `fake` for the duration of the call. */
async function withOperation(name, fake, options) {
	const real = OPERATIONS[name];
	OPERATIONS[name] = fake;
	try {
		const { ctx } = makeContext({ credentials: {}, ...options, params: { operation: name, ...options.params } });
		return await new DurableStep().execute.call(ctx);
	} finally {
		OPERATIONS[name] = real;
	}
}

/** A fake operation that records its calls and answers each item on the route `routes(i)`. */
function spy(routes, gate = false) {
	const calls = { start: [], step: [] };
	return {
		calls,
		module: {
			gate,
			async start(ctx, items) {
				calls.start.push(items);
				return async (stepCtx, i, item) => {
					calls.step.push(i);
					if (routes(i) === 'throw') throw new Error(`item ${i} failed`);
					return { output: routes(i), json: { ...item.json, answered: i } };
				};
			},
		},
	};
}

const items = () => [{ json: { n: 0 } }, { json: { n: 1 } }, { json: { n: 2 } }];

describe('router', () => {
	test('every_operation_field_value_has_one_module_and_no_module_is_unreachable', () => {
		assert.deepEqual(Object.keys(OPERATIONS).sort(), selectorValues().sort());
		for (const [name, op] of Object.entries(OPERATIONS)) {
			assert.equal(typeof op.start, 'function', name);
			assert.equal(typeof op.gate, 'boolean', name);
		}
		// The gates: an error item must never reach Proceed.
		assert.deepEqual(
			Object.keys(OPERATIONS).filter((n) => OPERATIONS[n].gate).sort(),
			['beginStep', 'gatedRequest', 'gatedSubworkflow', 'reportLookup'],
		);
	});

	for (const name of selectorValues()) {
		test(`dispatches_${name}_to_its_module`, async () => {
			const { calls, module } = spy(() => 'Proceed');
			const input = items();
			const out = await withOperation(name, module, { items: input, nodeVersion: 1.1, params: {} });
			assert.equal(calls.start.length, 1, 'started once per execution');
			assert.equal(calls.start[0], input, 'with all input items');
			assert.deepEqual(calls.step, [0, 1, 2], 'then asked item by item');
			assert.deepEqual(out[0].map((x) => [x.json.answered, x.pairedItem]), [
				[0, { item: 0 }],
				[1, { item: 1 }],
				[2, { item: 2 }],
			]);
		});
	}

	test('the_real_modules_start_without_touching_the_ledger_for_one_item', async () => {
		for (const [name, op] of Object.entries(OPERATIONS)) {
			const { ctx, calls } = makeContext({ items: [{ json: {} }], credentials: {}, params: { operation: name } });
			assert.equal(typeof (await op.start(ctx, [{ json: {} }])), 'function', name);
			assert.equal(calls.length, 0, name);
		}
	});

	test('items_go_to_the_output_their_answer_names', async () => {
		const routes = ['Needs Attention', 'Proceed', 'Already Done'];
		const { module } = spy((i) => routes[i], true);
		const out = await withOperation('beginStep', module, { items: items(), params: { beginOptions: {} } });
		assert.deepEqual(out.map((o) => o.map((x) => x.json.n)), [[1], [2], [0]]);
	});

	test('failed_items_with_continue_on_fail_never_reach_proceed_of_a_gate_nor_done', async () => {
		// [operation, node version, index of the output the error item lands on]
		const cases = [
			['beginStep', 1.1, 2],
			['reportLookup', 1.1, 2],
			['reportLookup', 1, 2],
			['recordOutcome', 1.1, 1],
			['recordOutcome', 1, 0],
			['startJob', 1.1, 0],
			['saveCheckpoint', 1, 0],
		];
		for (const [name, nodeVersion, index] of cases) {
			const { module } = spy(() => 'throw', OPERATIONS[name].gate);
			const out = await withOperation(name, module, { items: items().slice(0, 1), nodeVersion, continueOnFail: true, params: {} });
			const landed = out.findIndex((o) => o.length === 1);
			assert.equal(landed, index, `${name} ${nodeVersion}`);
			assert.deepEqual(out[landed][0].json, { error: 'item 0 failed', details: null });
		}
	});

	test('a_failed_item_without_continue_on_fail_fails_the_node_with_its_index', async () => {
		const { module } = spy((i) => (i === 1 ? 'throw' : 'Proceed'));
		await assert.rejects(withOperation('startJob', module, { items: items(), params: {} }), (err) => {
			assert.ok(err instanceof workflow.NodeOperationError);
			assert.equal(err.context.itemIndex, 1);
			return true;
		});
	});

	test('an_unknown_operation_is_a_node_operation_error', async () => {
		for (const name of ['publish', 'toString', '__proto__']) {
			const { ctx } = makeContext({ items: [{ json: {} }], credentials: {}, params: { operation: name } });
			await assert.rejects(new DurableStep().execute.call(ctx), (err) => {
				assert.ok(err instanceof workflow.NodeOperationError, name);
				assert.match(err.message, /^Unknown operation/);
				return true;
			});
		}
	});
});
