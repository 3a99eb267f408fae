// Workflows of N gated steps in a row, built from the one-step fixtures: the step's nodes are
// repeated (renamed "<name> <k>", each with its own action), and step k's exit output feeds step
// k+1's entry. For the benchmark's per-step cost, which a one-step workflow mixes with Start Job.
import { fillTemplate } from './harness.mjs';

/** The step of each fixture: its nodes, the node the previous one feeds, and the output that goes on. */
export const STEPS = {
	'gated-write.workflow.json': {
		nodes: ['Begin Step', 'Create Draft', 'Record Outcome', 'Already Done', 'Needs Attention'],
		entry: 'Begin Step',
		exit: ['Record Outcome', 0],
		// Record Outcome's defaults read the node named "Begin Step": name step k's Begin Step instead
		params: {
			'Record Outcome': (k) => ({
				operationKey: `={{ $('Begin Step ${k}').item.json.durable.operation_key }}`,
				fencingToken: `={{ $('Begin Step ${k}').item.json.durable.fencing_token }}`,
			}),
		},
	},
	'gated-request.workflow.json': { nodes: ['Create Draft', 'Already Done'], entry: 'Create Draft', exit: ['Create Draft', 0] },
	'plain-write.workflow.json': { nodes: ['Create Draft'], entry: 'Create Draft', exit: ['Create Draft', 0] },
};

const WIDTH = 1000;

export function chainWorkflow(file, n, values, { typeVersion } = {}) {
	const base = fillTemplate(file, values);
	const step = STEPS[file];
	const inStep = new Set(step.nodes);
	const name = (node, k) => `${node} ${k}`;
	const nodes = base.nodes.filter((node) => !inStep.has(node.name));
	const connections = {};
	for (const [from, out] of Object.entries(base.connections)) {
		if (inStep.has(from)) continue;
		connections[from] = { main: out.main.map((targets) => targets.map((t) => (inStep.has(t.node) ? { ...t, node: name(t.node, 1) } : t))) };
	}
	for (let k = 1; k <= n; k++) {
		step.nodes.forEach((nodeName, idx) => {
			const node = structuredClone(base.nodes.find((x) => x.name === nodeName));
			node.name = name(nodeName, k);
			node.id = `${node.id.slice(0, -4)}${(k * 16 + idx).toString(16).padStart(4, '0')}`;
			node.position = [node.position[0] + (k - 1) * WIDTH, node.position[1]];
			if (typeof node.parameters.action === 'string') node.parameters.action = `${node.parameters.action}_${k}`;
			Object.assign(node.parameters, step.params?.[nodeName]?.(k) ?? {});
			if (typeVersion && node.type.startsWith('n8n-nodes-durable.')) node.typeVersion = typeVersion;
			nodes.push(node);
			const out = base.connections[nodeName]?.main ?? [];
			connections[node.name] = { main: out.map((targets) => targets.map((t) => ({ ...t, node: name(t.node, k) }))) };
		});
		if (k < n) {
			const [exitNode, index] = step.exit;
			const main = connections[name(exitNode, k)].main;
			while (main.length <= index) main.push([]);
			main[index] = [...main[index], { node: name(step.entry, k + 1), type: 'main', index: 0 }];
		}
	}
	if (typeVersion) for (const node of nodes) if (node.type.startsWith('n8n-nodes-durable.')) node.typeVersion = typeVersion;
	return { ...base, name: `${base.name} x${n}`, nodes, connections };
}
