"""The lean lane of the read-ahead worker (web/lean_http.py, web/readahead_worker.py): which
requests it reads itself, that its answers are gunicorn's and Flask's byte for byte (but the
Date), and what a thread that keeps a connection after an answer does with whatever comes next:
a whole request, half of one, a stall, a pipelined pair, an Expect, a close. Against a real
`durable-ledger serve` with raw sockets."""

import json
import socket
import time

import pytest

from conftest import TOKENS
from durable_ledger.web import lean_http
from servers import LedgerServer

POLICY = (4094, 100, 8190, frozenset((b"x-forwarded-proto", b"x-forwarded-ssl")))
H = ("Authorization: Bearer runner-token", "Content-Type: application/json")


def _raw(path, body, *lines, version="HTTP/1.1", method="POST", host=True, length=True):
    body = body if isinstance(body, bytes) else body.encode()
    head = [f"{method} {path} {version}", *(["Host: x"] if host else []), *lines]
    if length:
        head.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body


def _read(raw):
    return lean_http.read(raw, raw.find(b"\r\n\r\n"), POLICY)


def test_lean_reads_a_plain_request_as_gunicorn_would():
    req = _read(_raw("/v1/operations/acme%3Aj1%3Av1%3Asend/confirm", "{}", "authorization:   Bearer t  ",
                     "Content-Type: application/json", "X-N8N-Execution-Id: 7"))
    assert (req.path, req.body, req.close) == ("/v1/operations/acme:j1:v1:send/confirm", b"{}", False)
    assert req.headers == {"host": "x", "authorization": "Bearer t", "content-type": "application/json",
                           "x-n8n-execution-id": "7", "content-length": "2"}
    assert _read(_raw("/v1/operations/k%FF/confirm", "{}", "Connection: close")).path == "/v1/operations/k\xff/confirm"
    assert _read(_raw("/v1/operations/begin", "{}", "Connection: close")).close


@pytest.mark.parametrize("raw", [
    _raw("/v1/operations/begin", "{}", version="HTTP/1.0"),
    _raw("/v1/operations/begin", "{}", method="PUT"),
    _raw("/v1/operations/begin?x=1", "{}"),
    _raw("/v1/operations/begin#f", "{}"),
    _raw("//v1/operations/begin", "{}"),
    _raw("http://x/v1/operations/begin", "{}"),
    _raw("/v1/operations/b\x7fgin", "{}"),
    _raw("/v1/operations/begin", "{}", host=False),
    _raw("/v1/operations/begin", "{}", length=False),
    _raw("/v1/operations/begin", "{}", "Content-Length: 2"),  # a second one
    _raw("/v1/operations/begin", "{}", "Host: y"),
    _raw("/v1/operations/begin", "{}", "Authorization: a", "Authorization: b"),
    _raw("/v1/operations/begin", "{}", "X_Token: a"),
    _raw("/v1/operations/begin", "{}", "X-A: a", " folded"),
    _raw("/v1/operations/begin", "{}", "X-A: a\x00b"),
    _raw("/v1/operations/begin", "{}", "X-A: a\rb"),
    _raw("/v1/operations/begin", "{}", "X-A a"),
    _raw("/v1/operations/begin", "{}", "Bad Name: a"),
    _raw("/v1/operations/begin", "{}", "Transfer-Encoding: chunked"),
    _raw("/v1/operations/begin", "{}", "Expect: 100-continue"),
    _raw("/v1/operations/begin", "{}", "Upgrade: h2c", "Connection: Upgrade"),
    _raw("/v1/operations/begin", "{}", "Connection: keep-alive, TE"),
    _raw("/v1/operations/begin", "{}", "X-Big: " + "a" * 8182),  # 8189 bytes, 8191 with its CRLF
    _raw("/v1/operations/begin", "{}", "X-Forwarded-Proto: https"),
    _raw("/v1/operations/begin", "{}", *[f"X-{i}: a" for i in range(101)]),
    _raw("/v1/operations/" + "k" * 5000 + "/confirm", "{}"),
    _raw("/v1/operations/begin", "{}") + b"POST",  # more than one request: the body is longer
    _raw("/v1/operations/begin", "{}", "Content-Length: +2", length=False),
])
def test_lean_leaves_anything_else_to_gunicorn(raw):
    assert _read(raw) is None


OPEN = []


@pytest.fixture(autouse=True)
def _close_connections():
    yield
    while OPEN:
        OPEN.pop().close()


class Conn:
    """One kept-alive client connection that reads answers one at a time by their Content-Length."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.buf = b""
        OPEN.append(self.sock)

    def send(self, raw):
        self.sock.sendall(raw)

    def answer(self):
        while b"\r\n\r\n" not in self.buf:
            self._more()
        head, _, rest = self.buf.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = {k.lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
        n = int(headers.get("content-length", 0))
        while len(rest) < n:
            self.buf = head + b"\r\n\r\n" + rest
            self._more()
            rest = self.buf.partition(b"\r\n\r\n")[2]
        self.buf = rest[n:]
        return lines[0].removeprefix("HTTP/1.1 "), headers, rest[:n]

    def final(self):
        """The next answer that is not an interim 1xx (HTTP allows any number of them before it;
        gunicorn sends its own 100 Continue after the read-ahead's)."""
        while (answer := self.answer())[0].startswith("1"):
            pass
        return answer

    def _more(self):
        chunk = self.sock.recv(65536)
        assert chunk, "the server closed the connection"
        self.buf += chunk

    def closed(self):
        self.sock.settimeout(5)
        return self.buf == b"" and self.sock.recv(1) == b""


def _begin(token, action):
    return json.dumps({"job_id": "r1", "action": action, "fencing_token": token, "payload": {"a": action}})


@pytest.fixture
def server(database, tmp_path):
    srv = LedgerServer(database, TOKENS, workers=1, threads=2, log_path=tmp_path / "ledger.log")
    srv.args += ["--read-timeout", "1"]
    with srv:
        c = Conn(srv.port)
        c.send(_raw("/v1/jobs/r1", '{"pipeline": "generic"}', *H, method="PUT"))
        assert c.answer()[0].startswith("201")
        c.send(_raw("/v1/jobs/r1/lease", '{"owner": "a"}', *H))
        srv.token = json.loads(c.answer()[2])["fencing_token"]
        yield srv


def _states(srv):
    c = Conn(srv.port)
    c.send(_raw("/v1/jobs/r1/operations", "", "Authorization: Bearer runner-token", method="GET", length=False))
    status, _, body = c.answer()
    assert status.startswith("200"), body
    return sorted(op["state"] for op in json.loads(body)["operations"])


def test_steps_back_to_back_on_one_connection(server):
    """Begin, confirm, begin, ... as fast as the answers come: each answered once, in order, kept alive."""
    c = Conn(server.port)
    for i in range(40):
        c.send(_raw("/v1/operations/begin", _begin(server.token, f"s{i}"), *H))
        status, headers, body = c.answer()
        assert (status, headers["connection"], json.loads(body)["decision"]) == ("200 OK", "keep-alive", "dispatch")
        key = json.loads(body)["operation"]["operation_key"]
        c.send(_raw(f"/v1/operations/{key.replace(':', '%3A')}/confirm",
                    json.dumps({"fencing_token": server.token, "remote_id": i}), *H))
        status, _, body = c.answer()
        assert (status, json.loads(body)["operation"]["state"]) == ("200 OK", "CONFIRMED")
    assert _states(server) == ["CONFIRMED"] * 40


def test_lean_answers_equal_gunicorn_and_flask_answers_kept_alive(server):
    """The same request on one connection: plain (the lean lane), then with a query string
    (gunicorn's parser and Flask's route): the same status line, headers (but the Date) and body."""
    c = Conn(server.port)
    stale = json.dumps({"fencing_token": server.token - 1, "remote_id": 1})
    c.send(_raw("/v1/operations/begin", _begin(server.token, "eq"), *H))
    key = json.loads(c.answer()[2])["operation"]["operation_key"].replace(":", "%3A")
    for path, body, lines in [
        (f"/v1/operations/{key}/confirm", stale, H),
        (f"/v1/operations/{key}/outcome", json.dumps({"fencing_token": server.token - 1, "status": "failed"}), H),
        ("/v1/operations/begin", _begin(server.token, "eq"), H),
        ("/v1/operations/begin", _begin(server.token, "eq"), ("Authorization: Bearer other-token", H[1])),
        ("/v1/operations/begin", _begin(server.token, "eq"), ("Authorization: Bearer editor-token", H[1])),
        ("/v1/operations/batch", json.dumps({"begin": [json.loads(_begin(server.token, "eq"))]}), H),
    ]:
        answers = []
        for suffix in ("", "?via=flask"):
            c.send(_raw(path + suffix, body, *lines))
            status, headers, data = c.answer()
            headers.pop("date")
            answers.append((status, headers, data))
        assert answers[0] == answers[1], path


def test_a_request_that_comes_late_or_in_pieces(server):
    """After an answer: the next request's head at once and its body later than the thread waits
    (back to the main loop with what came), then a pipelined pair, then half a request that
    stalls (408 after the read timeout, as any other)."""
    c = Conn(server.port)
    c.send(_raw("/v1/operations/begin", _begin(server.token, "p0"), *H))
    assert json.loads(c.answer()[2])["decision"] == "dispatch"
    raw = _raw("/v1/operations/begin", _begin(server.token, "p1"), *H)
    c.send(raw[:40])
    time.sleep(0.3)
    c.send(raw[40:])
    assert json.loads(c.answer()[2])["decision"] == "dispatch"
    c.send(_raw("/v1/operations/begin", _begin(server.token, "p2"), *H)
           + _raw("/v1/operations/begin", _begin(server.token, "p3"), *H))
    actions = [json.loads(c.answer()[2])["operation"]["action"] for _ in range(2)]
    assert actions == ["p2", "p3"]
    c.send(raw[:60])
    t0 = time.monotonic()
    status, _, body = c.answer()
    assert status.startswith("408") and json.loads(body)["error"]["code"] == "request_timeout"
    assert 0.8 < time.monotonic() - t0 < 3.5
    assert _states(server) == ["SENT"] * 4


def test_after_a_lean_answer_other_requests_are_gunicorns(server):
    """Whatever follows an answer at once on the same connection is answered as on a new one:
    a GET, an Expect: 100-continue (the 100 is sent once), a chunked body, then Connection: close."""
    c = Conn(server.port)
    c.send(_raw("/v1/operations/begin", _begin(server.token, "o0"), *H))
    assert c.answer()[0] == "200 OK"
    c.send(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    assert c.answer()[0] == "200 OK"
    body = _begin(server.token, "o1").encode()
    c.send(_raw("/v1/operations/begin", b"", *H, "Expect: 100-continue", length=False)[:-2]
           + f"Content-Length: {len(body)}\r\n\r\n".encode())
    assert c.answer()[0] == "100 Continue"
    c.send(body)
    status, _, data = c.final()
    assert (status, json.loads(data)["decision"]) == ("200 OK", "dispatch")
    body = _begin(server.token, "o2").encode()
    chunked = f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n"
    c.send(_raw("/v1/operations/begin", b"", *H, "Transfer-Encoding: chunked", length=False) + chunked)
    assert c.answer()[0] == "200 OK"
    c.send(_raw("/v1/operations/begin", _begin(server.token, "o3"), *H, "Connection: close"))
    status, headers, data = c.answer()
    assert (status, headers["connection"], json.loads(data)["decision"]) == ("200 OK", "close", "dispatch")
    assert c.closed()
    assert _states(server) == ["SENT"] * 4
