"""The remote the steps write to: a local order service that counts every write, at the source.

    POST /orders {"order_id"}  + Idempotency-Key   a write: recorded (counted) first, then 201
                                                   {"id", "order_id", "idempotency_key"}
    GET  /orders/by-key/<key>                      the order written with that key (200, the same
                                                   fields: the Look Up matches `idempotency_key`)
                                                   or 404 (nothing was written with it)

It never dedupes: a second write with the same key is a second order, so a duplicate shows.
`hold(order_id)`: that order's next write is recorded, then its answer waits for `release()`
(a fault is put in place meanwhile, e.g. the ledger's SQLite locked before its confirm).
"""
from __future__ import annotations

import json
import threading
from urllib.parse import unquote

from support.remote_server import serve


class CountingRemote:
    def __init__(self):
        self.writes: list[dict] = []
        self._lock = threading.Lock()
        self._holds: dict[str, threading.Event] = {}
        self.held: dict[str, threading.Event] = {}
        self.server, self.url = serve(self._write, self._lookup)

    # ------------------------------------------------------------------ what the tests read

    def writes_of(self, order_id: str) -> list[dict]:
        with self._lock:
            return [w for w in self.writes if w["order_id"] == order_id]

    def by_key(self, key: str) -> dict | None:
        with self._lock:
            return next((w for w in self.writes if w["key"] == key), None)

    def hold(self, order_id: str) -> threading.Event:
        """The order's next write is recorded, then answered only after `release(order_id)`;
        the returned event is set once that write is recorded."""
        with self._lock:
            self._holds[order_id] = threading.Event()
            self.held[order_id] = threading.Event()
            return self.held[order_id]

    def release(self, order_id: str):
        with self._lock:
            ev = self._holds.pop(order_id, None)
        if ev is not None:
            ev.set()

    def close(self):
        with self._lock:
            holds, self._holds = list(self._holds.values()), {}
        for ev in holds:
            ev.set()
        self.server.shutdown()
        self.server.server_close()

    # ------------------------------------------------------------------ the service

    def _write(self, h, raw: bytes):
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        order_id = str(body.get("order_id"))
        key = h.headers.get("Idempotency-Key")
        with self._lock:
            n = 1 + sum(1 for w in self.writes if w["order_id"] == order_id)
            row = {"id": f"{order_id}-{n}", "order_id": order_id, "key": key}
            self.writes.append(row)
            hold = self._holds.get(order_id)
            if hold is not None:
                self.held[order_id].set()
        if hold is not None:
            hold.wait(120)
        self._answer(h, 201, {"id": row["id"], "order_id": order_id, "idempotency_key": key})

    def _lookup(self, h):
        prefix = "/orders/by-key/"
        if not h.path.startswith(prefix):
            return self._answer(h, 404, {"error": "no such route"})
        row = self.by_key(unquote(h.path[len(prefix):].split("?", 1)[0]))
        if row is None:
            return self._answer(h, 404, {"error": "not found"})
        return self._answer(h, 200, {"id": row["id"], "order_id": row["order_id"], "idempotency_key": row["key"]})

    @staticmethod
    def _answer(h, status: int, doc: dict):
        out = json.dumps(doc).encode()
        try:
            h.send_response(status)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", str(len(out)))
            h.end_headers()
            h.wfile.write(out)
        except OSError:
            pass
