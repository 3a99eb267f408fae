"""A refunds API that counts what it creates: the remote every test counts writes at.

    POST /refunds {"order_id", "amount_cents", "key"}   -> 201 {"id": "rf-N", ...}   (a write, counted)
    GET  /refunds?key=K                                  -> 200 [refunds stamped with K]

It runs in a thread of the test process; the agent processes call it over HTTP. ``hold()`` makes
the next write wait after it is stored and before it is answered, so a test can kill -9 the
agent between the remote write and the moment the tool's result could be recorded.
"""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit


class Refunds:
    def __init__(self):
        self.refunds, self.lock = [], threading.Lock()
        self.written, self.release, self._hold = threading.Event(), threading.Event(), False
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def writes(self, order_id=None):
        with self.lock:
            return sum(1 for r in self.refunds if order_id is None or r["order_id"] == order_id)

    def hold(self):
        """The next write is stored, then answered only after `release` is set."""
        self.written.clear()
        self.release.clear()
        self._hold = True

    def stop(self):
        self.release.set()
        self.server.shutdown()
        self.server.server_close()

    def _store(self, body):
        with self.lock:
            refund = {"id": f"rf-{len(self.refunds) + 1}", **body}
            self.refunds.append(refund)
        held, self._hold = self._hold, False
        if held:
            self.written.set()
            self.release.wait(300)
        return refund

    def _handler(self):
        remote = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _answer(self, status, body):
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except OSError:  # the agent was killed while its write was held
                    pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                self._answer(201, remote._store(body))

            def do_GET(self):
                key = parse_qs(urlsplit(self.path).query).get("key", [None])[0]
                with remote.lock:
                    found = [r for r in remote.refunds if key is not None and r.get("key") == key]
                self._answer(200, found)

        return Handler
