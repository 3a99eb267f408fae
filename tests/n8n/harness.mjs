// Helpers for end-to-end tests in a real n8n (2.40.7 by default, N8N_VERSION for another one; installed by
// stack/n8n.sh).
import { execFile, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from '../../n8n-nodes-durable/test/ledger.mjs';

export const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const N8N_SH = path.join(REPO, 'stack', 'n8n.sh');
const PKG_DIR = path.join(REPO, 'n8n-nodes-durable');

/** The package tarball: DURABLE_NODE_TARBALL (the artifact `make dist` built) or a fresh `npm pack`. */
function packageTarball(tarball) {
	if (tarball) {
		const tgz = path.resolve(REPO, tarball);
		if (!fs.existsSync(tgz)) throw new Error(`DURABLE_NODE_TARBALL ${tgz} does not exist (run "make dist")`);
		return { tgz, cleanup() {} };
	}
	const packDir = fs.mkdtempSync(path.join(os.tmpdir(), 'durable-pack-'));
	const pack = spawnSync('npm', ['pack', '--json', '--pack-destination', packDir], { cwd: PKG_DIR, encoding: 'utf8' });
	if (pack.status !== 0) throw new Error(`npm pack failed: ${pack.stderr}`);
	const tgz = path.join(packDir, JSON.parse(pack.stdout)[0].filename);
	return { tgz, cleanup: () => fs.rmSync(packDir, { recursive: true, force: true }) };
}

/**
 * Installs the package tarball into the user folder's nodes directory exactly the way n8n installs
 * a community package (CommunityPackagesService.downloadPackage, the same in n8n 1.123 and 2.40),
 * with the local tarball in place of its `npm pack <name>@<version>` from the registry:
 * extract into nodes/node_modules/<name>, drop devDependencies / peerDependencies /
 * optionalDependencies from its package.json, `npm install` inside it with n8n's flags, and record
 * the package in nodes/package.json. n8n loads it from there at start-up (type names
 * `n8n-nodes-durable.*`, as real users get).
 */
export function installPackage(userFolder, { tarball = process.env.DURABLE_NODE_TARBALL } = {}) {
	const { tgz, cleanup } = packageTarball(tarball);
	try {
		const nodesDir = path.join(userFolder, '.n8n', 'nodes');
		const dest = path.join(nodesDir, 'node_modules', 'n8n-nodes-durable');
		fs.mkdirSync(dest, { recursive: true });
		const nodesPkg = path.join(nodesDir, 'package.json');
		if (!fs.existsSync(nodesPkg)) {
			fs.writeFileSync(nodesPkg, JSON.stringify({ name: 'installed-nodes', private: true, dependencies: {} }, null, 2));
		}
		const tar = spawnSync('tar', ['-xzf', tgz, '-C', dest, '--strip-components=1'], { encoding: 'utf8' });
		if (tar.status !== 0) throw new Error(`tar failed: ${tar.stderr}`);
		const pkgPath = path.join(dest, 'package.json');
		const { devDependencies, peerDependencies, optionalDependencies, ...pkg } = JSON.parse(fs.readFileSync(pkgPath, 'utf8'));
		fs.writeFileSync(pkgPath, JSON.stringify(pkg, null, 2));
		const npmArgs = ['install', '--audit=false', '--fund=false', '--bin-links=false', '--install-strategy=shallow',
			'--ignore-scripts=true', '--package-lock=false'];
		const npm = spawnSync('npm', npmArgs, { cwd: dest, encoding: 'utf8' });
		if (npm.status !== 0) throw new Error(`npm install in ${dest} failed: ${npm.stderr}`);
		const nodes = JSON.parse(fs.readFileSync(nodesPkg, 'utf8'));
		nodes.dependencies = { ...(nodes.dependencies ?? {}), [pkg.name]: pkg.version };
		fs.writeFileSync(nodesPkg, JSON.stringify(nodes, null, 2));
		const list = spawnSync('tar', ['-tzf', tgz], { encoding: 'utf8' });
		return {
			filename: path.basename(tgz),
			version: pkg.version,
			packedBytes: fs.statSync(tgz).size,
			files: list.stdout.split('\n').filter((l) => l && !l.endsWith('/')).length,
			n8nVersion: process.env.N8N_VERSION || 'default',
		};
	} finally {
		cleanup();
	}
}

export async function makeN8n() {
	const userFolder = fs.mkdtempSync(path.join(os.tmpdir(), 'durable-n8n-'));
	const env = {
		...process.env,
		N8N_USER_FOLDER: userFolder,
		N8N_PORT: String(await freePort()),
		N8N_RUNNERS_BROKER_PORT: String(await freePort()),
		N8N_LOG_LEVEL: 'info',
		// n8n 2.x runs the PUBLISHED version of a sub-workflow outside manual runs (`n8n execute` is
		// mode "cli"). `n8n publish:workflow` sets a workflow's active version; the publication service
		// (on by default) serves from a table that only a running `n8n start` fills: CLI runs read the
		// active version without it.
		N8N_USE_WORKFLOW_PUBLICATION_SERVICE: 'false',
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
	/**
	 * Imports the workflows in one CLI run. `publish`: the ids to publish too (their current version),
	 * what n8n 2.x needs to run a sub-workflow outside the editor: `n8n publish:workflow` each. n8n 1.x
	 * has no publication (it runs the saved version of a sub-workflow): nothing to publish there.
	 */
	async function importWorkflows(workflows, { publish = [] } = {}) {
		const r = await run(['import:workflow', `--input=${writeJson('workflows.json', workflows)}`]);
		if (r.code !== 0) throw new Error(`import:workflow failed (${r.code}):\n${r.stdout}\n${r.stderr}`);
		for (const id of publish) {
			const p = await run(['publish:workflow', `--id=${id}`]);
			if (p.code !== 0 && /Command "publish:workflow" not found/.test(`${p.stdout}\n${p.stderr}`)) return r; // 1.x
			if (p.code !== 0) throw new Error(`publish:workflow ${id} failed (${p.code}):\n${p.stdout}\n${p.stderr}`);
		}
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
