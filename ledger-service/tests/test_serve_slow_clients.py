"""Slow, idle, stalled and malformed clients, with raw sockets, against a real `durable-ledger serve`
and a real `proxy serve` (waitress, web/server.py): a normal request is still answered within 1 s,
a stalled connection is closed after the read timeout, malformed framing is refused 4xx at once
and leaves no thread spinning. The probes are in slow_clients.py (the bench runs them too)."""

import os
import time

import pytest
import requests

import slow_clients as sc
from conftest import TOKENS
from servers import LedgerServer, free_port

H = {"Authorization": "Bearer runner-token"}
# What each malformed request is answered (web/server_errors.py); Content-Length next to chunked
# is framed by chunked (RFC 9112 6.3), so its body reaches the route, which refuses it.
REFUSED = {"oversized_head": (431, "headers_too_large"), "length_and_chunked": (422, "validation_error"),
           "unknown_transfer_coding": (400, "unsupported_transfer_coding"),
           "chunked_not_last_coding": (400, "unsupported_transfer_coding")}


@pytest.fixture
def ledger(database, tmp_path):
    with LedgerServer(database, TOKENS, workers=2, threads=4, log_path=tmp_path / "ledger.log") as srv:
        yield srv


def _timed(call):
    t0 = time.monotonic()
    r = call()
    return r, time.monotonic() - t0


def test_serve_slow_clients_do_not_delay_health_or_begin(ledger):
    """200 idle + 100 partial heads + 40 stalled bodies (Content-Length first or last, chunked,
    Expect: 100-continue never followed) + heads over 64 KiB that never end, on 2 x 4 threads."""
    s = requests.Session()
    assert s.put(f"{ledger.url}/v1/jobs/slow", headers=H, json={}).status_code == 201
    tok = s.post(f"{ledger.url}/v1/jobs/slow/lease", headers=H, json={"owner": "a"}).json()["fencing_token"]
    socks = sc.open_stalls(ledger.port)
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
    took = sc.health_under_load(ledger.url, ledger.port)  # the same load, plus never-ending heads
    assert all(t is not None and t < 1.0 for t in took), took


@pytest.fixture
def quick(database, tmp_path):
    """A server that closes a silent connection after 1 s."""
    srv = LedgerServer(database, TOKENS, workers=1, threads=2, log_path=tmp_path / "ledger.log")
    srv.args += ["--read-timeout", "1"]
    with srv:
        yield srv


@pytest.mark.parametrize("case", sorted(sc.STALLS))
def test_serve_closes_a_stalled_connection_after_the_read_timeout(quick, case):
    """Nothing is answered to a request that never arrives whole; the connection is closed after
    the read timeout (1 s, checked every second) and never holds one of the 2 threads meanwhile."""
    socks = [sc.connect(quick.port, first_bytes=sc.STALLS[case]) for _ in range(4)]
    try:
        r, took = _timed(lambda: requests.get(f"{quick.url}/health", timeout=5))
        assert (r.status_code, took < 1.0) == (200, True), took
    finally:
        for s in socks:
            s.close()
    answer = sc.answer_to(quick.port, sc.STALLS[case], wait=6)
    assert answer["closed"] and 0.9 < answer["s"] < 4.0, answer
    assert answer["status"] is None or 400 <= answer["status"] < 500, answer


def test_serve_refuses_a_body_larger_than_it_takes_before_it_is_sent(quick):
    answer = sc.answer_to(quick.port, b"PUT /v1/artifacts HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999\r\n\r\n")
    assert (answer["status"], sc.error_code(answer), answer["s"] < 1.0) == (413, "payload_too_large", True), answer


def test_serve_refuses_a_never_ending_head_over_64_kib(quick):
    answer = sc.answer_to(quick.port, sc.BEGIN + b"X-Pad: " + b"a" * (70 * 1024), wait=5)
    assert (answer["status"], sc.error_code(answer), answer["s"] < 1.0) == (431, "headers_too_large", True), answer


def test_serve_refuses_malformed_framing_at_once_and_nothing_spins(quick):
    """Negative, 0x, underscore and non-hex chunk sizes, a chunk without its CRLF, unknown
    codings, contradictory or malformed lengths: each answered at once with a 4xx in the API's
    error shape (400 `malformed_request` unless REFUSED says otherwise), never a 5xx or a hang;
    then the server is idle."""
    answers = {case: sc.answer_to(quick.port, raw, wait=5) for case, raw in sc.MALFORMED.items()}
    got = {case: (a["status"], sc.error_code(a)) for case, a in answers.items()}
    assert got == {case: REFUSED.get(case, (400, "malformed_request")) for case in sc.MALFORMED}
    assert [case for case, a in answers.items() if a["s"] > 1.0] == []
    assert sc.idle_cpu_share(quick.proc.pid, 1.5) < 0.2
    assert requests.get(f"{quick.url}/health", timeout=5).status_code == 200


def test_serve_answers_expect_100_continue_and_only_to_http_11(quick):
    body = b'{"job_id": "x"}'
    head = b"POST /v1/operations/begin HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" \
           b"Content-Length: %d\r\nExpect: 100-continue\r\n\r\n" % len(body)
    s = sc.connect(quick.port, first_bytes=head)
    try:
        assert s.recv(100).startswith(b"HTTP/1.1 100 Continue\r\n\r\n")
        s.sendall(body)
        assert s.recv(65536).startswith(b"HTTP/1.1 401")  # the app's answer: no token
    finally:
        s.close()
    answer = sc.answer_to(quick.port, head.replace(b"HTTP/1.1", b"HTTP/1.0") + body)
    assert answer["status"] == 401 and not answer["raw"].startswith(b"HTTP/1.1 100"), answer


def test_proxy_serve_slow_clients_do_not_delay_health(database, tmp_path):
    port = free_port()
    srv = LedgerServer(database, TOKENS, workers=2, threads=4, port=port, log_path=tmp_path / "proxy.log")
    srv.args = [srv.args[0], "proxy", "serve", "--host", "127.0.0.1", "--port", str(port),
                "--workers", "2", "--threads", "4"]
    with srv:
        took = sc.health_under_load(srv.url, port)
    assert all(t is not None and t < 1.0 for t in took), took


def test_serve_answers_on_descriptors_past_1024(database, tmp_path):
    """1100 idle connections push the worker's descriptors past 1024 (where select() fails):
    a connection opened then is answered twice on keep-alive."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 2500:
        pytest.skip(f"descriptor limit {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 2500), hard))  # the server inherits it
    srv = LedgerServer(database, TOKENS, workers=1, threads=2, log_path=tmp_path / "ledger.log")
    srv.args += ["--connection-limit", "1200"]
    socks = []
    try:
        with srv:
            socks = [sc.connect(srv.port) for _ in range(1100)]
            time.sleep(1.0)  # accepted by now
            s = requests.Session()
            for _ in range(2):
                r, took = _timed(lambda: s.get(f"{srv.url}/health", timeout=5))
                assert (r.status_code, took < 1.0) == (200, True), took
            with open(f"/proc/{srv.proc.pid}/task/{srv.proc.pid}/children") as f:
                worker = [int(p) for p in f.read().split()]  # the server's forked worker (and its helpers)
            fds = [int(fd) for pid in worker for fd in os.listdir(f"/proc/{pid}/fd")]
            assert max(fds) >= 1024, max(fds)
    finally:
        for sock in socks:
            sock.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
