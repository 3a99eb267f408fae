// Helpers for end-to-end tests in a real n8n 2.40.7 (installed by stack/n8n.sh).
import { execFile, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from '../../n8n-nodes-durable/test/ledger.mjs';

export const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const N8N_SH = path.join(REPO, 'stack', 'n8n.sh');
const PKG_DIR = path.join(REPO, 'n8n-nodes-durable');

/** npm pack the built package and extract it where n8n loads community packages from. */
export function installPackage(userFolder) {
	const packDir = fs.mkdtempSync(path.join(os.tmpdir(), 'durable-pack-'));
	const pack = spawnSync('npm', ['pack', '--json', '--pack-destination', packDir], { cwd: PKG_DIR, encoding: 'utf8' });
	if (pack.status !== 0) throw new Error(`npm pack failed: ${pack.stderr}`);
	const info = JSON.parse(pack.stdout)[0];
	const tgz = path.join(packDir, info.filename);
	const dest = path.join(userFolder, '.n8n', 'nodes', 'node_modules', 'n8n-nodes-durable');
	fs.mkdirSync(dest, { recursive: true });
	const tar = spawnSync('tar', ['xzf', tgz, '-C', dest, '--strip-components=1'], { encoding: 'utf8' });
	if (tar.status !== 0) throw new Error(`tar failed: ${tar.stderr}`);
	const packedBytes = fs.statSync(tgz).size;
	fs.rmSync(packDir, { recursive: true, force: true });
	return { filename: info.filename, packedBytes, unpackedBytes: info.unpackedSize, files: info.entryCount };
}

export async function makeN8n() {
	const userFolder = fs.mkdtempSync(path.join(os.tmpdir(), 'durable-n8n-'));
	const env = {
		...process.env,
		N8N_USER_FOLDER: userFolder,
		N8N_PORT: String(await freePort()),
		N8N_RUNNERS_BROKER_PORT: String(await freePort()),
		N8N_LOG_LEVEL: 'info',
	};
	/** Runs the n8n CLI; resolves with {code, stdout, stderr, ms}. */
	function run(args, { timeoutMs = 180000 } = {}) {
		const t0 = performance.now();
		return new Promise((resolve) => {
			execFile('bash', [N8N_SH, 'n8n', ...args], { env, timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) => {
				resolve({ code: err ? (err.code ?? 1) : 0, stdout, stderr, ms: performance.now() - t0 });
			});
		});
	}
	function writeJson(name, value) {
		const file = path.join(userFolder, name);
		fs.writeFileSync(file, JSON.stringify(value, null, 2));
		return file;
	}
	async function importCredentials(creds) {
		const r = await run(['import:credentials', `--input=${writeJson('credentials.json', creds)}`]);
		if (r.code !== 0) throw new Error(`import:credentials failed (${r.code}):\n${r.stdout}\n${r.stderr}`);
		return r;
	}
	async function importWorkflows(workflows) {
		const r = await run(['import:workflow', `--input=${writeJson('workflows.json', workflows)}`]);
		if (r.code !== 0) throw new Error(`import:workflow failed (${r.code}):\n${r.stdout}\n${r.stderr}`);
		return r;
	}
	/** n8n execute --id --rawOutput; returns the parsed IRun plus the process wall time. */
	async function execute(id) {
		const r = await run(['execute', `--id=${id}`, '--rawOutput']);
		const parsed = parseRun(r.stdout);
		if (!parsed) throw new Error(`n8n execute printed no run data (exit ${r.code}):\n${r.stdout}\n${r.stderr}`);
		return { ...r, run: parsed };
	}
	function cleanup() {
		fs.rmSync(userFolder, { recursive: true, force: true });
	}
	return { userFolder, env, run, importCredentials, importWorkflows, execute, cleanup };
}

/**
 * `--rawOutput` prints the IRun as indented JSON (a "{" line ... a "}" line), surrounded by
 * log lines (the task runner may log after it).
 */
export function parseRun(stdout) {
	const lines = stdout.split('\n');
	for (let i = lines.length - 1; i >= 0; i--) {
		if (lines[i] !== '{') continue;
		const end = lines.indexOf('}', i);
		if (end < 0) continue;
		try {
			const value = JSON.parse(lines.slice(i, end + 1).join('\n'));
			if (value && typeof value === 'object' && value.data) return value;
		} catch {
			// not the run JSON
		}
	}
	return null;
}

/** Items a node put on each output in its (first) run: [[json...], [json...], ...]. */
export function outputsOf(run, nodeName) {
	const runs = run.data?.resultData?.runData?.[nodeName];
	if (!runs?.length) return null;
	return (runs[0].data?.main ?? []).map((items) => (items ?? []).map((it) => it.json));
}

export function nodeMs(run, nodeName) {
	const runs = run.data?.resultData?.runData?.[nodeName];
	return runs?.length ? runs.reduce((s, r) => s + (r.executionTime ?? 0), 0) : 0;
}

export function executionMs(run) {
	return new Date(run.stoppedAt).getTime() - new Date(run.startedAt).getTime();
}

export function fillTemplate(file, values) {
	let text = fs.readFileSync(path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures', file), 'utf8');
	for (const [k, v] of Object.entries(values)) text = text.split(`__${k}__`).join(String(v));
	return JSON.parse(text);
}
