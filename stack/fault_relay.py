"""An HTTP relay that can stop one request at a chosen boundary, for crash demos and tests.

    n8n ──▶ FaultRelay ──▶ publishing proxy (or ledger)

Pass-through by default. `arm(method, path_regex, mode)` picks the next matching request (several
traps may be armed at once, e.g. one per job of runs that are killed together; each takes one
request, the first armed that matches):

    mode "before_send"   the request is held and never forwarded: the caller crashes before
                         anything reached the remote (the ledger has it SENT, WordPress has nothing)
    mode "hold_response" the request is forwarded and answered upstream, but the answer is held:
                         the remote wrote it, the caller never learns (crash before the receipt)

`armed.wait()` returns once the request is held (for hold_response: after the upstream answered),
so a test can SIGKILL the caller at exactly that point. `close()` releases held requests.
Standard library only; HTTP/1.1 with `Connection: close` on every answer.
"""
from __future__ import annotations

import http.client
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade", "host"}


@dataclass
class Trap:
    method: str
    path: re.Pattern
    mode: str
    body: re.Pattern | None = None
    hit: threading.Event = field(default_factory=threading.Event)
    request: dict | None = None
    upstream_status: int | None = None
    upstream_body: bytes | None = None

    def matches(self, method, path, body):
        return (method == self.method and self.path.search(path) is not None
                and (self.body is None or self.body.search(body.decode("utf-8", "replace")) is not None))


class FaultRelay:
    def __init__(self, upstream_url: str, host: str = "127.0.0.1", port: int = 0):
        parts = urlsplit(upstream_url)
        self.upstream = (parts.hostname, parts.port or 80)
        self.traps: list[Trap] = []
        self.forwarded = 0
        self._release = threading.Event()
        self._lock = threading.Lock()
        relay = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_a):
                pass

            def _body(self):
                if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
                    chunks = []
                    while True:
                        size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                        if size == 0:
                            self.rfile.readline()
                            return b"".join(chunks)
                        chunks.append(self.rfile.read(size))
                        self.rfile.readline()
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            def _handle(self):
                body = self._body()
                trap = relay._take_trap(self.command, self.path, body)
                if trap is None:
                    return self._forward(body)
                trap.request = {"method": self.command, "path": self.path, "body": body.decode("utf-8", "replace")}
                if trap.mode == "hold_response":
                    trap.upstream_status, _h, trap.upstream_body = relay._send_upstream(
                        self.command, self.path, self.headers, body)
                trap.hit.set()
                relay._release.wait()  # held until the relay closes: the caller is killed meanwhile
                self.close_connection = True

            def _forward(self, body):
                try:
                    status, headers, data = relay._send_upstream(self.command, self.path, self.headers, body)
                except OSError:
                    self.send_error(502, "upstream unreachable")
                    return
                self.send_response(status)
                for k, v in headers:
                    if k.lower() not in HOP_BY_HOP and k.lower() != "content-length":
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(data)
                self.close_connection = True

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _handle

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request, client_address):
                pass  # a client killed mid-answer (that is the point here): nothing to report

        self._server = Server((host, port), Handler)
        self.port = self._server.server_address[1]
        self.url = f"http://{host}:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def arm(self, method: str, path_regex: str, mode: str, body_regex: str | None = None) -> Trap:
        if mode not in ("before_send", "hold_response"):
            raise ValueError(f"unknown mode {mode}")
        trap = Trap(method.upper(), re.compile(path_regex), mode, re.compile(body_regex) if body_regex else None)
        with self._lock:
            self.traps.append(trap)
        return trap

    def disarm(self):
        """Drops every trap not hit yet (requests already held stay held until close())."""
        with self._lock:
            self.traps.clear()

    def _take_trap(self, method, path, body):
        with self._lock:
            for trap in self.traps:
                if trap.matches(method, path, body):
                    self.traps.remove(trap)  # one request only
                    return trap
            self.forwarded += 1
            return None

    def _send_upstream(self, method, path, headers, body):
        conn = http.client.HTTPConnection(*self.upstream, timeout=300)
        try:
            out = {k: v for k, v in headers.items() if k.lower() not in HOP_BY_HOP}
            out["Content-Length"] = str(len(body))
            out["Host"] = f"{self.upstream[0]}:{self.upstream[1]}"
            conn.request(method, path, body=body if body or method not in ("GET", "HEAD") else None, headers=out)
            resp = conn.getresponse()
            return resp.status, resp.getheaders(), resp.read()
        finally:
            conn.close()

    def close(self):
        self._release.set()
        self._server.shutdown()
        self._server.server_close()
