"""A tiny TCP proxy that can lose responses: the request reaches the server, the answer never
reaches the client.

    client ──request──▶ LossyProxy ──request──▶ WordPress (writes!)
    client ◀──RST────── LossyProxy ◀─response── WordPress (swallowed)

`drop_responses` is the number of upcoming POST requests whose response is swallowed (GETs,
e.g. the proxy's plugin detection, pass); after that, traffic is forwarded untouched. The client
sees a connection reset, exactly what a network drop after the remote write looks like.
`skip_posts` lets that many POSTs through first (drop the n-th write rather than the next one).
"""
from __future__ import annotations

import socket
import struct
import threading


class LossyProxy:
    def __init__(self, upstream_host: str, upstream_port: int, drop_responses: int = 0):
        self.upstream = (upstream_host, upstream_port)
        self.drop_responses = drop_responses
        self.skip_posts = 0
        self.dropped = 0
        self.connections = 0
        self._lock = threading.Lock()
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self.port = self._sock.getsockname()[1]
        self._closed = False
        self._thread = threading.Thread(target=self._accept_loop, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept_loop(self):
        while not self._closed:
            try:
                client, _ = self._sock.accept()
            except OSError:
                return
            with self._lock:
                self.connections += 1
            threading.Thread(target=self._handle, args=(client,), daemon=True).start()

    def _handle(self, client: socket.socket):
        first = client.recv(65536)
        with self._lock:
            drop = self.drop_responses > 0 and first.startswith(b"POST ")
            if drop and self.skip_posts > 0:
                self.skip_posts -= 1
                drop = False
            if drop:
                self.drop_responses -= 1
        upstream = socket.create_connection(self.upstream, timeout=60)
        upstream.sendall(first)
        done = threading.Event()

        def pump_request():
            try:
                while not done.is_set():
                    data = client.recv(65536)
                    if not data:
                        break
                    upstream.sendall(data)
            except OSError:
                pass

        pump = threading.Thread(target=pump_request, daemon=True)
        pump.start()
        try:
            while True:
                data = upstream.recv(65536)
                if not data:
                    break
                if drop:
                    # The server may keep the connection alive: once the answer stops flowing
                    # for a moment it is complete (WordPress sends it after the write).
                    upstream.settimeout(0.5)
                else:
                    client.sendall(data)
        except OSError:
            pass
        finally:
            done.set()
            # Wake the request pump first: a thread blocked in recv() keeps the socket alive,
            # and close() would then send neither FIN nor RST.
            try:
                client.shutdown(socket.SHUT_RD)
            except OSError:
                pass
            pump.join(2)
            if drop:
                with self._lock:
                    self.dropped += 1
                # SO_LINGER 0: close with RST so the client sees a reset, not a clean EOF.
                client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            else:
                try:
                    client.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
            for s in (client, upstream):
                try:
                    s.close()
                except OSError:
                    pass

    def close(self):
        self._closed = True
        self._sock.close()
