"""A local order service that records every request it gets: the side effects are counted here,
at the remote, never from what n8n or the ledger say.

    POST /orders {"order_id", ...}        a write: committed (counted) first, then answered
    GET  /orders/by-key/<Idempotency-Key> the order written with that key: 200 {"id", "idempotency_key"} or 404

How the n-th write of an order is answered is planned per order id (`plan`), so one server
serves every scenario of a module at once:

    ok        201 {"id": "<order>-<n>"} at once
    delay     the same after DELAY_S (widens the window of two concurrent triggers)
    fail500   committed, then 500 (the client cannot tell it was written)
    slow      committed, then the answer after SLOW_S, past the client's timeout
    hold      committed, then the answer held until `release()` (n8n is killed meanwhile)
    late      committed only LATE_S after the request arrived (a slow backend), then 201

Lookups are planned the same way (`lookup_plan`: "fail500" answers 500 once, else the truth).
"""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote

DELAY_S = 0.6
SLOW_S = 7.0
LATE_S = 2.5


class RecordingRemote:
    def __init__(self):
        self.requests: list[dict] = []
        self.plan: dict[str, list[str]] = {}
        self.lookup_plan: dict[str, list[str]] = {}
        self.by_key: dict[str, str] = {}
        self._lock = threading.Lock()
        self._released = threading.Event()
        self._held = threading.Condition(self._lock)
        self.held = 0
        remote = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_a):
                pass

            def do_POST(self):
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                remote._write(self, raw)

            def do_GET(self):
                remote._lookup(self)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    # ------------------------------------------------------------------ what the tests read

    def writes(self, order_id: str) -> list[dict]:
        with self._lock:
            return [r for r in self.requests if r["kind"] == "write" and r["order_id"] == order_id]

    def lookups(self, order_id: str) -> list[dict]:
        with self._lock:
            return [r for r in self.requests if r["kind"] == "lookup" and r["order_id"] == order_id]

    def wait_held(self, n: int, timeout: float = 60) -> bool:
        with self._held:
            return self._held.wait_for(lambda: self.held >= n, timeout)

    def wait_writes(self, order_id: str, n: int, timeout: float = 30) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if len(self.writes(order_id)) >= n:
                return True
            time.sleep(0.05)
        return False

    def release(self):
        """Answer every held write (their callers are gone by now); later holds wait again."""
        with self._lock:
            self._released.set()
            self._released = threading.Event()

    def close(self):
        self._released.set()
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
            n = 1 + sum(1 for r in self.requests if r["kind"] == "write" and r["order_id"] == order_id)
            plan = self.plan.get(order_id) or []
            late = n <= len(plan) and plan[n - 1] == "late"
            self.requests.append({"kind": "arrived", "order_id": order_id, "key": key, "t": time.time()})
        if late:
            time.sleep(LATE_S)  # the request is in, nothing is written yet: a lookup now finds nothing
        with self._lock:
            n = 1 + sum(1 for r in self.requests if r["kind"] == "write" and r["order_id"] == order_id)
            plan = self.plan.get(order_id) or []
            mode = plan[n - 1] if n <= len(plan) else "ok"
            remote_id = f"{order_id}-{n}"
            self.requests.append({"kind": "write", "order_id": order_id, "n": n, "mode": mode, "key": key,
                                  "id": remote_id, "t": time.time()})
            if key:
                self.by_key.setdefault(key, remote_id)
            released = self._released
            if mode == "hold":
                self.held += 1
                self._held.notify_all()
        # committed above; now the answer
        if mode == "hold":
            released.wait(300)
        elif mode == "slow":
            time.sleep(SLOW_S)
        elif mode == "delay":
            time.sleep(DELAY_S)
        if mode == "fail500":
            self._answer(h, 500, {"error": "internal error"})
        else:
            self._answer(h, 201, {"id": remote_id, "order_id": order_id})

    def _lookup(self, h):
        prefix = "/orders/by-key/"
        if not h.path.startswith(prefix):
            return self._answer(h, 404, {"error": "no such route"})
        key = unquote(h.path[len(prefix):].split("?", 1)[0])
        with self._lock:
            remote_id = self.by_key.get(key)
            order_id = next((r["order_id"] for r in self.requests if r.get("key") == key), None)
            n = 1 + sum(1 for r in self.requests if r["kind"] == "lookup" and r["key"] == key)
            plan = self.lookup_plan.get(order_id or "") or []
            mode = plan[n - 1] if n <= len(plan) else "truth"
            self.requests.append({"kind": "lookup", "order_id": order_id, "key": key, "mode": mode,
                                  "found": remote_id, "t": time.time()})
        if mode == "fail500":
            return self._answer(h, 500, {"error": "lookup unavailable"})
        if remote_id is None:
            return self._answer(h, 404, {"error": "not found"})
        return self._answer(h, 200, {"id": remote_id, "order_id": order_id, "idempotency_key": key})

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
            pass  # the caller gave up (timeout) or was killed while we held the answer
