"""A TCP relay between the ledger and PostgreSQL that reads the wire protocol and can break one
statement at its commit point.

    ledger ──▶ PgRelay ──▶ PostgreSQL (the private cluster)

Pass-through by default. `arm(pattern, mode, within=None)` takes the next simple-protocol query
('Q' message: psycopg2 sends every statement so, parameters inlined) whose text matches `pattern`
(and, with `within`, whose transaction so far, from its BEGIN, matches `within`: a COMMIT is
recognised by what it commits). Peewee runs in autocommit, so a single statement (the gate's
`EXECUTE durable_begin(...)`, `durable_confirm`, `durable_begin_many`) commits by itself and
`BEGIN ... COMMIT` frames the other writes. Modes:

    answer_lost   the query goes to the server, which runs (commits) it and answers; the answer
                  is swallowed. Once it is complete (ReadyForQuery), `trap.hit` is set and the
                  relay waits for `trap.release()` (the test may kill PostgreSQL meanwhile); then
                  the link is cut both ways (RST to the ledger). The commit landed, the ledger
                  cannot know.
    held          the query never reaches the server: `trap.hit` is set at once, the relay waits
                  for `release()`, then cuts the link. Nothing of it landed.

`refuse(True)`: every new connection is closed at once (PostgreSQL unreachable).
Standard library only.
"""
from __future__ import annotations

import re
import socket
import struct
import threading
from dataclasses import dataclass, field

_SSL_REQUEST, _GSS_REQUEST, _CANCEL = 80877103, 80877104, 80877102


@dataclass
class Trap:
    pattern: re.Pattern
    mode: str
    within: re.Pattern | None = None
    hit: threading.Event = field(default_factory=threading.Event)
    _released: threading.Event = field(default_factory=threading.Event)
    query: str | None = None
    answered: bool = False  # the server sent its whole answer (ReadyForQuery) before the cut

    def matches(self, text: str, txn: str) -> bool:
        return self.pattern.search(text) is not None and (self.within is None or self.within.search(txn) is not None)

    def release(self):
        self._released.set()


class PgRelay:
    def __init__(self, upstream_port: int, host: str = "127.0.0.1"):
        self.upstream = (host, upstream_port)
        self.traps: list[Trap] = []
        self.refusing = False
        self.cuts = 0
        self._lock = threading.Lock()
        self._links: set[_Link] = set()
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((host, 0))
        self._sock.listen(128)
        self.port = self._sock.getsockname()[1]
        self._closed = False
        threading.Thread(target=self._accept_loop, daemon=True).start()

    def arm(self, pattern: str, mode: str, within: str | None = None) -> Trap:
        if mode not in ("answer_lost", "held"):
            raise ValueError(mode)
        trap = Trap(re.compile(pattern, re.S), mode, re.compile(within, re.S) if within else None)
        with self._lock:
            self.traps.append(trap)
        return trap

    def disarm(self):
        with self._lock:
            traps, self.traps = self.traps, []
        for t in traps:
            t.release()

    def refuse(self, on: bool):
        self.refusing = on

    def _take(self, text: str, txn: str) -> Trap | None:
        with self._lock:
            for trap in self.traps:
                if trap.matches(text, txn):
                    self.traps.remove(trap)
                    return trap
        return None

    def _accept_loop(self):
        while not self._closed:
            try:
                client, _ = self._sock.accept()
            except OSError:
                return
            if self.refusing:
                _reset(client)
                continue
            try:
                server = socket.create_connection(self.upstream, timeout=5)
                server.settimeout(None)
            except OSError:  # the server is down: the client sees its connection closed at once
                _reset(client)
                continue
            link = _Link(self, client, server)
            with self._lock:
                self._links.add(link)
            link.start()

    def close(self):
        self._closed = True
        self.disarm()
        self._sock.close()
        with self._lock:
            links = list(self._links)
        for link in links:
            link.cut()


class _Link:
    """One ledger connection: client->server messages parsed (to find the trapped query),
    server->client messages parsed (to know when its answer is complete)."""

    def __init__(self, relay: PgRelay, client: socket.socket, server: socket.socket):
        self.relay, self.client, self.server = relay, client, server
        self.single_byte_answers = 0  # SSLRequest / GSSENCRequest answered 'N' / 'G' / 'S' in one byte
        self.trap: Trap | None = None
        self.txn = ""
        self._cut = threading.Event()

    def start(self):
        threading.Thread(target=self._client_to_server, daemon=True).start()
        threading.Thread(target=self._server_to_client, daemon=True).start()

    def cut(self):
        if self._cut.is_set():
            return
        self._cut.set()
        self.relay.cuts += 1
        _reset(self.client)
        _reset(self.server)
        with self.relay._lock:
            self.relay._links.discard(self)

    def _client_to_server(self):
        try:
            while True:  # the untyped start: SSL / GSS requests, then the startup message
                head = _recv_exact(self.client, 4)
                (length,) = struct.unpack("!I", head)
                body = _recv_exact(self.client, length - 4)
                code = struct.unpack("!I", body[:4])[0] if len(body) >= 4 else 0
                if code in (_SSL_REQUEST, _GSS_REQUEST):
                    self.single_byte_answers += 1
                self.server.sendall(head + body)
                if code == _CANCEL:
                    return
                if code not in (_SSL_REQUEST, _GSS_REQUEST):
                    break
            while True:
                kind = _recv_exact(self.client, 1)
                head = _recv_exact(self.client, 4)
                (length,) = struct.unpack("!I", head)
                body = _recv_exact(self.client, length - 4)
                if kind == b"Q":
                    text = body[:-1].decode("utf-8", "replace")
                    if re.match(r"\s*BEGIN\b", text, re.I):
                        self.txn = ""
                    self.txn += text + "\n"
                    trap = self.relay._take(text, self.txn)
                    if trap is not None:
                        trap.query = text
                        self.trap = trap
                        if trap.mode == "held":
                            trap.hit.set()
                            trap._released.wait(300)
                            self.cut()
                            return
                self.server.sendall(kind + head + body)
        except OSError:
            self.cut()

    def _server_to_client(self):
        try:
            for _ in range(64):
                if self.single_byte_answers == 0:
                    break
                b = _recv_exact(self.server, 1)
                self.single_byte_answers -= 1
                self.client.sendall(b)
                if b == b"S":  # TLS: nothing more can be read here (the suite connects with sslmode=disable)
                    raise OSError("TLS through the relay")
            while True:
                kind = _recv_exact(self.server, 1)
                head = _recv_exact(self.server, 4)
                (length,) = struct.unpack("!I", head)
                body = _recv_exact(self.server, length - 4)
                trap = self.trap
                if trap is not None and trap.mode == "answer_lost":
                    if kind == b"Z":  # ReadyForQuery: the statement (and its commit) is done
                        trap.answered = True
                        trap.hit.set()
                        trap._released.wait(300)
                        self.cut()
                        return
                    continue  # swallowed
                self.client.sendall(kind + head + body)
        except OSError:
            self.cut()


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise OSError("closed")
        buf += chunk
    return bytes(buf)


def _reset(sock: socket.socket):
    """Close with RST: the peer sees the link break, not an orderly end."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.shutdown(socket.SHUT_RD)  # wakes the other pump's recv(); sends nothing
    except OSError:
        pass
    try:
        sock.close()
    except OSError:
        pass
