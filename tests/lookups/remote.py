"""A local order API that counts every write and answers lookups the way real APIs do.

Writes (counted here, never from what n8n or the ledger say):

    POST /orders {"order_id"}, Idempotency-Key: K
        first write of an order: `commit500` (committed, then 500) or `fail500` (500, nothing
        committed), as the case plans; every later write: committed, 201 {"id", ...}

Lookups, one route per answer shape (`<shape>` below), always with another order (`other-1`)
committed, so that a filter the API ignores has something else to answer:

    object      GET /shapes/object/orders/K            200 the order, or 404 {"error": "not found"}
    bare        GET /shapes/bare/orders?key=K          [order] or []
    data        ... {"data": [...]}     results  {"results": [...]}     items  {"items": [...]}
    paginated   {"results": [...], "next": "<url of page 2>"} (a cursor on every page)
    stripe      {"object": "list", "data": [...], "has_more": false, "url": "/v1/orders"}; the key
                in the order's metadata.op_key, as Stripe keeps it
    ignored     the filter is ignored: a bare list of every order
    error200    200 {"error": {"type": "rate_limit", "message": ...}}
    html200     200 text/html (a login or proxy page)
    html404     404 text/html (a proxy's "not found" page)
    slow        the truth as `object`, after SLOW_S (past the client's timeout)

The ledger's generic HTTP reconciler asks `GET /reconcile/<job_id>?key=K` (DURABLE_RECONCILE_HTTP),
its shape named by the job (order) id's second part:

    rcorrect    {"found": true, "operation_key": K, "remote_id", "receipt"} or
                {"found": false, "operation_key": K, "definitive": true}
    rwrapped    {"data": <the correct answer>}
    rerror      200 {"error": {...}, "found": false, "operation_key": K}
    rhtml       200 text/html
    r404        404 {"error": "not found"} (the protocol's "absent, not definitive")
    rotherkey   the correct answer for another key (other-1's)
"""
from __future__ import annotations

import json
import threading
import time
from urllib.parse import parse_qs, quote, unquote, urlsplit

from support.remote_server import serve

SLOW_S = 5.0
LIST_SHAPES = ("bare", "data", "results", "items", "paginated", "stripe", "ignored")
SHAPES = ("object", *LIST_SHAPES, "error200", "html200", "html404", "slow")
RECONCILE_SHAPES = ("rcorrect", "rwrapped", "rerror", "rhtml", "r404", "rotherkey")
HTML = "<!doctype html><html><head><title>Sign in</title></head><body><h1>Please sign in</h1></body></html>"
OTHER = {"order_id": "other-1", "key": "other-job:create_order:1"}


class ShapesRemote:
    def __init__(self):
        self.lock = threading.Lock()
        self.plan: dict[str, str] = {}  # order id -> how its first write is answered
        self.writes: list[dict] = []  # committed writes
        self.arrivals: list[dict] = []  # every POST, committed or not
        self.lookups: list[dict] = []
        self._commit("other-1", OTHER["key"])
        self.server, self.url = serve(self._write, self._get)

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    # ------------------------------------------------------------------ what the tests read

    def writes_of(self, order_id: str) -> int:
        with self.lock:
            return sum(1 for w in self.writes if w["order_id"] == order_id)

    def lookups_of(self, order_id: str) -> int:
        with self.lock:
            return sum(1 for w in self.lookups if w["order_id"] == order_id)

    def last_arrival(self) -> float:
        with self.lock:
            return max((a["t"] for a in self.arrivals), default=0.0)

    def lookup_url(self, shape: str) -> str:
        """The Look Up URL of a shape, with the node's `{operation_key}` placeholder."""
        if shape in ("object", "slow", "html404"):
            return f"{self.url}/shapes/{shape}/orders/{{operation_key}}"
        return f"{self.url}/shapes/{shape}/orders?idempotency_key={{operation_key}}"

    # ------------------------------------------------------------------ writes

    def _commit(self, order_id: str, key: str | None) -> dict:
        n = len(self.writes) + 1
        w = {"order_id": order_id, "key": key, "id": f"ord_{n:04d}", "t": time.time()}
        self.writes.append(w)
        return w

    def _write(self, h, raw: bytes):
        try:
            order_id = str(json.loads(raw or b"{}").get("order_id"))
        except (ValueError, AttributeError):
            order_id = "None"
        key = h.headers.get("Idempotency-Key")
        with self.lock:
            first = not any(a["order_id"] == order_id for a in self.arrivals)
            self.arrivals.append({"order_id": order_id, "key": key, "t": time.time()})
            mode = self.plan.get(order_id, "ok") if first else "ok"
            w = None if mode == "fail500" else self._commit(order_id, key)
        if mode in ("fail500", "commit500"):
            return self._json(h, 500, {"error": {"message": "internal error"}})
        return self._json(h, 201, self._order(w))

    @staticmethod
    def _order(w: dict) -> dict:
        return {"id": w["id"], "order_id": w["order_id"], "idempotency_key": w["key"], "amount": 1000}

    @staticmethod
    def _stripe(w: dict) -> dict:
        return {"id": w["id"], "object": "order", "amount": 1000, "metadata": {"op_key": w["key"], "order_id": w["order_id"]}}

    # ------------------------------------------------------------------ lookups

    def _get(self, h):
        parts = urlsplit(h.path)
        segs = [unquote(s) for s in parts.path.strip("/").split("/")]
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        if len(segs) == 2 and segs[0] == "reconcile":
            return self._reconcile(h, segs[1], query.get("key", ""))
        if len(segs) < 3 or segs[0] != "shapes" or segs[1] not in SHAPES:
            return self._json(h, 404, {"error": "no such route"})
        shape = segs[1]
        key = segs[3] if len(segs) == 4 else query.get("idempotency_key", "")
        with self.lock:
            mine = [w for w in self.writes if w["key"] == key]
            every = list(self.writes)
            order_id = next((a["order_id"] for a in self.arrivals if a["key"] == key), None)
            self.lookups.append({"order_id": order_id, "key": key, "shape": shape, "t": time.time()})
        if shape == "slow":
            time.sleep(SLOW_S)
        if shape in ("object", "slow"):
            return self._json(h, 200, self._order(mine[0])) if mine else self._json(h, 404, {"error": "not found"})
        if shape == "error200":
            return self._json(h, 200, {"error": {"type": "rate_limit", "message": "Too many requests, try later"}})
        if shape == "html200":
            return self._send(h, 200, "text/html; charset=utf-8", HTML)
        if shape == "html404":
            return self._send(h, 404, "text/html; charset=utf-8", HTML.replace("Sign in", "Not Found"))
        if shape == "stripe":
            return self._json(h, 200, {"object": "list", "data": [self._stripe(w) for w in mine],
                                       "has_more": False, "url": "/v1/orders"})
        listed = [self._order(w) for w in (every if shape == "ignored" else mine)]
        if shape in ("bare", "ignored"):
            return self._json(h, 200, listed)
        if shape == "paginated":
            nxt = f"{self.url}/shapes/paginated/orders?idempotency_key={quote(key)}&cursor=2"
            return self._json(h, 200, {"results": listed, "next": nxt})
        return self._json(h, 200, {shape: listed})

    def _reconcile(self, h, job_id: str, key: str):
        shape = job_id.split("-")[1] if "-" in job_id else ""
        with self.lock:
            mine = [w for w in self.writes if w["key"] == key]
            other = next(w for w in self.writes if w["order_id"] == "other-1")
            self.lookups.append({"order_id": job_id, "key": key, "shape": shape, "t": time.time()})

        def correct(k, found):
            if found:
                return {"found": True, "operation_key": k, "remote_id": found[0]["id"],
                        "receipt": {"order_id": found[0]["order_id"]}}
            return {"found": False, "operation_key": k, "definitive": True}

        if shape == "rcorrect":
            return self._json(h, 200, correct(key, mine))
        if shape == "rwrapped":
            return self._json(h, 200, {"data": correct(key, mine)})
        if shape == "rerror":
            return self._json(h, 200, {"error": {"message": "search index unavailable"}, "found": False,
                                       "operation_key": key})
        if shape == "rhtml":
            return self._send(h, 200, "text/html; charset=utf-8", HTML)
        if shape == "r404":
            return self._json(h, 404, {"error": "not found"})
        if shape == "rotherkey":
            return self._json(h, 200, correct(other["key"], [other]))
        return self._json(h, 500, {"error": f"unknown reconcile shape {shape!r}"})

    # ------------------------------------------------------------------ wire

    def _json(self, h, status: int, doc):
        self._send(h, status, "application/json", json.dumps(doc))

    @staticmethod
    def _send(h, status: int, content_type: str, text: str):
        out = text.encode()
        try:
            h.send_response(status)
            h.send_header("Content-Type", content_type)
            h.send_header("Content-Length", str(len(out)))
            h.end_headers()
            h.wfile.write(out)
        except OSError:
            pass  # the caller gave up (its timeout)
