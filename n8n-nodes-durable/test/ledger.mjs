// Starts a REAL ledger service (durable-ledger serve) on a free port with a private SQLite
// database, for the unit tests and the n8n end-to-end tests. No mocks of the ledger.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

export const TENANT = 'acme';
export const RUNNER_TOKEN = 'runner-secret';
export const EDITOR_TOKEN = 'editor-secret';
export const APPROVER_TOKEN = 'approver-secret';
export const OTHER_TENANT_RUNNER_TOKEN = 'other-runner-secret';

export function freePort() {
	return new Promise((resolve, reject) => {
		const s = net.createServer();
		s.on('error', reject);
		s.listen(0, '127.0.0.1', () => {
			const { port } = s.address();
			s.close(() => resolve(port));
		});
	});
}

function ledgerBin() {
	const bin = process.env.DURABLE_LEDGER_BIN || path.join(REPO, '.venv', 'bin', 'durable-ledger');
	if (!fs.existsSync(bin)) {
		throw new Error(`ledger CLI not found at ${bin}: run "make setup" at the repo root (or set DURABLE_LEDGER_BIN)`);
	}
	return bin;
}

export async function startLedger({ env = {} } = {}) {
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'durable-ledger-'));
	const port = await freePort();
	const logPath = path.join(dir, 'ledger.log');
	const log = fs.openSync(logPath, 'a');
	const child = spawn(
		ledgerBin(),
		['serve', '--host', '127.0.0.1', '--port', String(port), '--workers', '1'],
		{
			env: {
				...process.env,
				DURABLE_DATABASE_URL: `sqlite:///${path.join(dir, 'ledger.db')}`,
				DURABLE_BOOTSTRAP_TOKENS: `${TENANT}:runner:${RUNNER_TOKEN},${TENANT}:editor:${EDITOR_TOKEN},${TENANT}:approver:${APPROVER_TOKEN},other:runner:${OTHER_TENANT_RUNNER_TOKEN}`,
				DURABLE_LOG_LEVEL: 'WARNING',
				...env,
			},
			stdio: ['ignore', log, log],
		},
	);
	const url = `http://127.0.0.1:${port}`;
	const deadline = Date.now() + 30000;
	for (;;) {
		if (child.exitCode !== null) {
			throw new Error(`ledger exited with ${child.exitCode}:\n${fs.readFileSync(logPath, 'utf8')}`);
		}
		try {
			const res = await fetch(`${url}/health`);
			if (res.ok) break;
		} catch {
			// not listening yet
		}
		if (Date.now() > deadline) {
			child.kill('SIGKILL');
			throw new Error(`ledger did not answer /health within 30 s:\n${fs.readFileSync(logPath, 'utf8')}`);
		}
		await new Promise((r) => setTimeout(r, 100));
	}

	/** Direct API access for arranging and asserting ledger state in tests. */
	async function api(method, p, body, token = RUNNER_TOKEN) {
		const res = await fetch(`${url}${p}`, {
			method,
			headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
			body: body === undefined ? undefined : JSON.stringify(body),
		});
		const text = await res.text();
		let json = null;
		try {
			json = text ? JSON.parse(text) : null;
		} catch {
			json = { raw: text };
		}
		return { status: res.status, body: json };
	}

	async function stop() {
		if (child.exitCode === null) {
			const exited = new Promise((r) => child.once('exit', r));
			child.kill('SIGTERM');
			const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
			await exited;
			clearTimeout(timer);
		}
		fs.closeSync(log);
		fs.rmSync(dir, { recursive: true, force: true });
	}

	return { url, port, api, stop, logPath };
}
