// A tiny HTTP "remote system" for end-to-end tests: counts the writes it accepts.
//   POST /write        -> 201 {"id": "obj-N"}         (a normal side effect)
//   POST /write-hang   -> counts the write, then never answers (the response is "lost")
//   POST /fail/<code>  -> answers <code>, counts nothing
//   GET  /count        -> {"writes": N, "bodies": [...]}
//   GET  /find?operation_key=K -> {"matches": [{"id": "obj-N"}]} the writes whose body has that operation_key
import http from 'node:http';

export function startSink() {
	const state = { writes: 0, bodies: [], hanging: new Set() };
	const keyOf = (raw) => {
		try {
			return JSON.parse(raw).operation_key;
		} catch {
			return undefined;
		}
	};
	const server = http.createServer((req, res) => {
		let raw = '';
		req.on('data', (c) => (raw += c));
		req.on('end', () => {
			const send = (code, body) => {
				res.writeHead(code, { 'content-type': 'application/json' });
				res.end(JSON.stringify(body));
			};
			if (req.method === 'GET' && req.url === '/count') return send(200, { writes: state.writes, bodies: state.bodies });
			if (req.method === 'GET' && req.url.startsWith('/find?')) {
				const key = new URL(req.url, 'http://sink').searchParams.get('operation_key');
				const matches = state.bodies.flatMap((b, i) => (key && keyOf(b) === key ? [{ id: `obj-${i + 1}` }] : []));
				return send(200, { matches });
			}
			if (req.method === 'POST' && req.url === '/write') {
				state.writes += 1;
				state.bodies.push(raw);
				return send(201, { id: `obj-${state.writes}`, created: true });
			}
			if (req.method === 'POST' && req.url === '/write-hang') {
				state.writes += 1;
				state.bodies.push(raw);
				state.hanging.add(res); // the write happened; the answer never comes
				return undefined;
			}
			const fail = /^\/fail\/(\d{3})$/.exec(req.url);
			if (req.method === 'POST' && fail) return send(Number(fail[1]), { message: `forced ${fail[1]}` });
			return send(404, { message: 'no such route' });
		});
	});
	return new Promise((resolve) => {
		server.listen(0, '127.0.0.1', () => {
			const url = `http://127.0.0.1:${server.address().port}`;
			resolve({
				url,
				state,
				close: () =>
					new Promise((r) => {
						for (const res of state.hanging) res.destroy();
						server.closeAllConnections?.();
						server.close(() => r());
					}),
			});
		});
	});
}
