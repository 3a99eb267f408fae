"""Slow, idle and stalled connections never delay a normal request (readahead_worker.py),
against a real `durable-ledger serve` and a real `proxy serve`."""

import socket
import time

import pytest
import requests

from conftest import TOKENS
from servers import LedgerServer, free_port

H = {"Authorization": "Bearer runner-token"}
SLOW = 200  # connections of each kind below, on 2 workers x 4 threads


def _open(port, first_bytes):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    if first_bytes:
        s.sendall(first_bytes)
    return s


def _slow_connections(port, n):
    """n connections spread over: one byte of a request line, a fresh connection that sends
    nothing, a kept-alive connection after one answered request, headers whose body stalls."""
    kinds = [b"P", b"", None, b"POST /v1/operations/begin HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer runner-token"
             b"\r\nContent-Type: application/json\r\nContent-Length: 5000\r\n\r\n{\"job_id\": "]
    socks = []
    for i in range(n):
        kind = kinds[i % len(kinds)]
        if kind is None:  # idle keep-alive: one whole request answered, then silence
            s = _open(port, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            assert s.recv(65536).startswith(b"HTTP/1.1 200")
        else:
            s = _open(port, kind)
        socks.append(s)
    return socks


def _timed(call):
    t0 = time.monotonic()
    r = call()
    return r, time.monotonic() - t0


@pytest.fixture
def ledger(database, tmp_path):
    with LedgerServer(database, TOKENS, workers=2, threads=4, log_path=tmp_path / "ledger.log") as srv:
        yield srv


def test_serve_slow_clients_do_not_delay_health_or_begin(ledger):
    s = requests.Session()
    assert s.put(f"{ledger.url}/v1/jobs/slow", headers=H, json={}).status_code == 201
    tok = s.post(f"{ledger.url}/v1/jobs/slow/lease", headers=H, json={"owner": "a"}).json()["fencing_token"]
    socks = _slow_connections(ledger.port, SLOW)
    try:
        time.sleep(0.5)  # every slow connection is accepted and waiting by now
        for n in range(3):
            r, took = _timed(lambda: requests.get(f"{ledger.url}/health", timeout=10))
            assert (r.status_code, took < 1.0) == (200, True), took
            body = {"job_id": "slow", "action": f"a{n}", "payload": {"n": n}, "fencing_token": tok}
            r, took = _timed(lambda: requests.post(f"{ledger.url}/v1/operations/begin", headers=H, json=body,
                                                   timeout=10))
            assert (r.status_code, r.json()["decision"], took < 1.0) == (200, "dispatch", True), took
    finally:
        for sock in socks:
            sock.close()


def test_serve_stalled_request_answered_408_after_read_timeout(database, tmp_path):
    srv = LedgerServer(database, TOKENS, workers=1, threads=2, log_path=tmp_path / "ledger.log")
    srv.args += ["--read-timeout", "1"]
    with srv:
        s = _open(srv.port, b"GET /health HTTP/1.1\r\nHost: x\r\n")
        s.settimeout(5)
        t0 = time.monotonic()
        answer = s.recv(65536)
        assert answer.startswith(b"HTTP/1.1 408") and b'"request_timeout"' in answer
        assert 0.9 < time.monotonic() - t0 < 3.5
        s.close()
        # A body announced larger than the largest the ledger takes is refused before it is sent.
        s = _open(srv.port, b"PUT /v1/artifacts HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999\r\n\r\n")
        s.settimeout(5)
        answer = s.recv(65536)
        s.close()
        assert answer.startswith(b"HTTP/1.1 413") and b'"payload_too_large"' in answer


def test_proxy_serve_slow_clients_do_not_delay_health(database, tmp_path):
    port = free_port()
    srv = LedgerServer(database, TOKENS, workers=2, threads=4, port=port, log_path=tmp_path / "proxy.log")
    srv.args = [srv.args[0], "proxy", "serve", "--host", "127.0.0.1", "--port", str(port),
                "--workers", "2", "--threads", "4"]
    with srv:
        socks = _slow_connections(port, SLOW)
        try:
            time.sleep(0.5)
            for _ in range(3):
                r, took = _timed(lambda: requests.get(f"{srv.url}/health", timeout=10))
                assert (r.status_code, took < 1.0) == (200, True), took
        finally:
            for sock in socks:
                sock.close()
