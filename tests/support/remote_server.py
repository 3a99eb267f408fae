"""The local HTTP server behind a suite's stand-in remote: each POST handed over with its body
read, each GET as it came, on a port of its own, in threads."""
from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def serve(on_post, on_get) -> tuple[ThreadingHTTPServer, str]:
    """Starts the server; ``on_post(handler, raw_body)`` and ``on_get(handler)`` answer. Returns
    the server (``shutdown()`` stops it) and its base URL."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *_a):
            pass

        def do_POST(self):
            on_post(self, self.rfile.read(int(self.headers.get("Content-Length") or 0)))

        def do_GET(self):
            on_get(self)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"
