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

const handedOut = new Set();

function portRange() {
	// DURABLE_PORT_RANGE ("lo-hi"): the slice stack/run_suites.py gives this suite, so suites
	// running side by side never pick the same port. Otherwise below the kernel's ephemeral range
	// (as stack/localhost.py): a port from listen(0) lies inside it, and an outgoing connection
	// (n8n to its broker, the ledger to its database) can take it as its source port in the
	// seconds before the server we start binds it.
	const [lo, hi] = (process.env.DURABLE_PORT_RANGE || '').split('-').map(Number);
	if (lo > 0 && hi > lo) return [lo, hi + 1];
	let floor = 32768;
	try {
		floor = Number(fs.readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').split(/\s+/)[0]) || floor;
	} catch {}
	return [15000, Math.max(15001, floor)];
}

function canBind(port) {
	return new Promise((resolve) => {
		const s = net.createServer();
		s.once('error', () => resolve(false));
		s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
	});
}

export async function freePort() {
	const [lo, hi] = portRange();
	for (let i = 0; i < 200; i++) {
		const port = lo + Math.floor(Math.random() * (hi - lo));
		if (handedOut.has(port) || !(await canBind(port))) continue;
		handedOut.add(port);
		return port;
	}
	throw new Error(`no free port in ${lo}-${hi - 1}`);
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
