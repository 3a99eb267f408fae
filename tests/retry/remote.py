"""A local order service that records every request it gets: the side effects are counted here,
at the remote, never from what n8n or the ledger say.

    POST /orders {"order_id", ...}        a write: committed (counted) first, then answered
    GET  /orders/by-key/<Idempotency-Key> the order written with that key: 200 {"id", "idempotency_key"} or 404

How the n-th write of an order is answered is planned per order id (`plan`), so one server
serves every scenario of a module at once:

    ok        201 {"id": "<order>-<n>"} at once
    delay     the same after DELAY_S (widens the window of two concurrent triggers)
    busy      the same after BUSY_S (a remote that takes 1.5 s to answer a write)
    fail500   committed, then 500 (the client cannot tell it was written)
    slow      committed, then the answer after SLOW_S, past the client's timeout
    hold      committed, then the answer held until `release()` (n8n is killed meanwhile)
    late      committed only LATE_S after the request arrived (a slow backend), then 201

Lookups are planned the same way (`lookup_plan`: "fail500" answers 500 once, else the truth).

`RecordingRemote(dedupe=True)` honours the Idempotency-Key header as the IETF draft
(draft-ietf-httpapi-idempotency-key-header) describes it. The first request with a key claims
the key when it arrives; a repeat with that key

    while the first is still being processed   409, nothing written ("conflict")
    once the first one completed               its stored status and body again, with
                                               `Idempotent-Replayed: true`, nothing written ("replay")
    with a different body                      422, nothing written ("refused")

The first write's failure modes stay as they are (the client sees the same 500, timeout or
held answer); what is stored is the result of the execution:

    fail500   the stored answer is the committed order's 201. The 500 stands for a layer after
              the commit (a gateway, the response's rendering) that failed on the way out: the
              idempotency record is written with the order, in the same transaction, so the
              layer that failed never sees it (Brandur Leach's atomic phases; Stripe's API v2
              likewise finishes the work and answers its result). A remote whose endpoint
              itself answered 500 and stored that (Stripe's API v1 replays a stored 500) would
              answer 500 to every repeat: the node gets no verdict and the step stays unknown.
    slow      the 201, stored when it is answered (SLOW_S after the commit): repeats before
              then get 409
    hold      the 201, stored when `release()` lets the answer go: repeats meanwhile get 409
    late      the key is claimed on arrival, before the LATE_S wait: repeats then get 409
"""
from __future__ import annotations

import json
import threading
import time
from urllib.parse import unquote

from support.remote_server import serve

DELAY_S = 0.6
SLOW_S = 7.0
LATE_S = 2.5
BUSY_S = 1.5


class RecordingRemote:
    def __init__(self, dedupe: bool = False):
        self.dedupe = dedupe
        # Idempotency-Key -> {"body": the first request's body, "answer": (status, doc) once completed}
        self.keys: dict[str, dict] = {}
        self.requests: list[dict] = []
        self.plan: dict[str, list[str]] = {}
        self.lookup_plan: dict[str, list[str]] = {}
        self.by_key: dict[str, str] = {}
        self._lock = threading.Lock()
        self._released = threading.Event()
        self._held = threading.Condition(self._lock)
        self.held = 0
        self.server, self.url = serve(self._write, self._lookup)

    # ------------------------------------------------------------------ what the tests read

    def writes(self, order_id: str) -> list[dict]:
        with self._lock:
            return [r for r in self.requests if r["kind"] == "write" and r["order_id"] == order_id]

    def lookups(self, order_id: str) -> list[dict]:
        with self._lock:
            return [r for r in self.requests if r["kind"] == "lookup" and r["order_id"] == order_id]

    def repeats(self, order_id: str) -> list[str]:
        """How a deduping remote answered the repeats of the order's key: replay, conflict, refused."""
        with self._lock:
            return [r["kind"] for r in self.requests
                    if r["kind"] in ("replay", "conflict", "refused") and r["order_id"] == order_id]

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
        if self.dedupe and key and self._repeat(h, key, order_id, body):
            return
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
        elif mode == "busy":
            time.sleep(BUSY_S)
        done = {"id": remote_id, "order_id": order_id}
        if self.dedupe and key:
            with self._lock:  # completed: from now on a repeat gets this (fail500 too: see above)
                self.keys[key]["answer"] = (201, done)
        if mode == "fail500":
            self._answer(h, 500, {"error": "internal error"})
        else:
            self._answer(h, 201, done)

    def _repeat(self, h, key: str, order_id: str, body: dict) -> bool:
        """A deduping remote's first look at the key: claims it (False: go on and write), or
        answers a repeat without writing anything (True)."""
        with self._lock:
            first = self.keys.get(key)
            if first is None:
                self.keys[key] = {"body": body, "answer": None}
                return False
            if first["body"] != body:
                kind, status, doc = "refused", 422, {"error": "Idempotency-Key is already used for another payload"}
            elif first["answer"] is None:
                kind, status, doc = "conflict", 409, {"error": "a request is outstanding for this Idempotency-Key"}
            else:
                kind, (status, doc) = "replay", first["answer"]
            self.requests.append({"kind": kind, "order_id": order_id, "key": key, "status": status, "t": time.time()})
        self._answer(h, status, doc, {"Idempotent-Replayed": "true"} if kind == "replay" else None)
        return True

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
    def _answer(h, status: int, doc: dict, headers: dict | None = None):
        out = json.dumps(doc).encode()
        try:
            h.send_response(status)
            for name, value in (headers or {}).items():
                h.send_header(name, value)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", str(len(out)))
            h.end_headers()
            h.wfile.write(out)
        except OSError:
            pass  # the caller gave up (timeout) or was killed while we held the answer
