#!/usr/bin/env python3
"""A small refunds API, the remote side effect of the gated agent tool. Counts what it creates.

Like most real APIs it has NO duplicate protection of its own: every `POST /v1/refunds` creates a
new refund (the `Idempotency-Key` header is recorded, not honoured), so a repeated tool call would
refund twice. What it offers is a search by the key the caller stamped on the object, which is
what the workflow's Look Up path uses:

  POST /v1/refunds            {customer_id, refund_id, amount_cents, currency, operation_key}
                              -> 201 {id: "re_000001", status: "succeeded", ...}
  GET  /v1/refunds?operation_key=K   -> {"data": [refunds stamped with K]}
  GET  /v1/refunds?refund_id=R       -> {"data": [refunds for that business refund id]}
  GET  /stats                 -> {"creates": N, "refunds": [...]}   (counted at the remote)
  GET  /health

Standard library only; state in memory (the process outlives the n8n processes a test kills).
Usage: python refund_service.py --port PORT
"""
from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

LOCK = threading.Lock()
REFUNDS: list[dict] = []


class Handler(BaseHTTPRequestHandler):
    server_version = "refunds-demo/1"

    def log_message(self, fmt, *args):
        sys.stderr.write("[refunds] " + (fmt % args) + "\n")

    def _send(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        url = urlsplit(self.path)
        q = {k: v[0] for k, v in parse_qs(url.query).items()}
        with LOCK:
            if url.path == "/health":
                return self._send(200, {"status": "ok", "creates": len(REFUNDS)})
            if url.path == "/stats":
                return self._send(200, {"creates": len(REFUNDS), "refunds": list(REFUNDS)})
            if url.path == "/v1/refunds":
                rows = [r for r in REFUNDS if all(str(r.get(k)) == v for k, v in q.items()
                                                  if k in ("operation_key", "refund_id", "customer_id"))]
                return self._send(200, {"object": "list", "data": rows})
        self._send(404, {"error": {"message": f"no route {url.path}"}})

    def do_POST(self):
        url = urlsplit(self.path)
        if url.path != "/v1/refunds":
            return self._send(404, {"error": {"message": f"no route {url.path}"}})
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        except ValueError:
            return self._send(400, {"error": {"message": "body must be JSON"}})
        missing = [k for k in ("customer_id", "refund_id", "amount_cents", "currency") if body.get(k) in (None, "")]
        if missing:
            return self._send(400, {"error": {"message": f"missing {', '.join(missing)}"}})
        with LOCK:
            refund = {"id": f"re_{len(REFUNDS) + 1:06d}", "object": "refund", "status": "succeeded",
                      "customer_id": body["customer_id"], "refund_id": body["refund_id"],
                      "amount_cents": body["amount_cents"], "currency": body["currency"],
                      "operation_key": body.get("operation_key"),
                      "idempotency_key_header": self.headers.get("Idempotency-Key"), "created": int(time.time())}
            REFUNDS.append(refund)
        self._send(201, refund)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    a = ap.parse_args()
    ThreadingHTTPServer((a.host, a.port), Handler).serve_forever()
