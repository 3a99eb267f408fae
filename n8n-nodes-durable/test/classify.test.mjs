import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { test } from 'node:test';

const require = createRequire(import.meta.url);
const { readSideEffectFailure } = require('../dist/nodes/DurableStep/operations/recordOutcome/classify.js');

const f = (json, error) => readSideEffectFailure(error === undefined ? { json } : { json, error });

test('classify_success_item_is_not_a_failure', () => {
	assert.equal(f({ id: 1 }), null);
	assert.equal(f({ error: '' }), null);
});

test('classify_timeouts', () => {
	assert.equal(f({ error: { code: 'ECONNABORTED', message: 'timeout of 500ms exceeded' } }).errorKind, 'timeout');
	assert.equal(f({ error: { code: 'ETIMEDOUT' } }).errorKind, 'timeout');
	assert.equal(f({ error: 'The connection timed out, consider setting the Retry on Fail option' }).errorKind, 'timeout');
});

test('classify_resets_and_refusals', () => {
	assert.equal(f({ error: { code: 'ECONNRESET', message: 'socket hang up' } }).errorKind, 'connection_reset');
	assert.equal(f({ error: { message: 'socket hang up' } }).errorKind, 'connection_reset');
	assert.equal(f({ error: { code: 'ECONNREFUSED' } }).errorKind, 'connection_refused');
});

test('classify_http_status_from_n8n_error_shapes', () => {
	assert.equal(f({ error: { message: 'x' }, details: { httpCode: '422' } }).httpStatus, 422);
	assert.equal(f({ error: { status: 500, message: 'x' } }).httpStatus, 500);
	assert.equal(f({ error: { httpCode: '401', message: 'x' } }).httpStatus, 401);
	assert.equal(f({ error: { message: 'Request failed with status code 503' } }).httpStatus, 503);
	assert.equal(f({ error: '404 - "not found"' }).httpStatus, 404);
	assert.equal(f({}, { message: 'boom', httpCode: '502' }).httpStatus, 502);
});
