"""Byte sequences on which the lean lane (web/lean_http.py, web/readahead_worker.py) answered
differently from gunicorn + Flask (the same request with ``?via=flask``), found by attacking it
with raw sockets. Each compares the two answers (status line, headers but the Date, body)."""

import json
import os
import shutil
import socket
import threading

from conftest import TOKENS
from servers import LedgerServer

H = ("Authorization: Bearer runner-token", "Content-Type: application/json")
PATH = "/v1/operations/k1/confirm"
STALE = json.dumps({"fencing_token": 1, "remote_id": 1})


def _raw(path, body, *lines):
    head = [f"POST {path} HTTP/1.1", "Host: x", *lines, f"Content-Length: {len(body)}"]
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body.encode()


def _exchange(port, data, wait=1.0):
    """Everything the server sends until it closes or is silent for ``wait`` s, and whether it closed."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(data)
        s.settimeout(wait)
        out, closed = b"", False
        try:
            while chunk := s.recv(65536):
                out += chunk
            closed = True
        except socket.timeout:
            pass
    head, _, body = out.partition(b"\r\n\r\n")
    return [line for line in head.split(b"\r\n") if not line.startswith(b"Date:")], body, closed


def _both(port, *lines):
    return _exchange(port, _raw(PATH, STALE, *lines)), _exchange(port, _raw(PATH + "?via=flask", STALE, *lines))


def test_lean_refuses_header_lines_gunicorn_refuses(database, tmp_path):
    """gunicorn counts a field line with its CRLF against limit_request_field_size (8190): a line
    of 8189 or 8190 bytes is 431 there; the lean lane compared the line without its CRLF."""
    with LedgerServer(database, TOKENS, workers=1, threads=2, log_path=tmp_path / "ledger.log") as srv:
        for n in (8188, 8189, 8190, 8191):
            lean, flask = _both(srv.port, *H, "X-Big: " + "a" * (n - 7))
            assert lean == flask, n


def test_lean_refuses_contradictory_scheme_headers(database, tmp_path):
    """From a trusted peer (forwarded_allow_ips, 127.0.0.1 by default) gunicorn refuses
    secure_scheme_headers that disagree (400 "Contradictory scheme headers")."""
    with LedgerServer(database, TOKENS, workers=1, threads=2, log_path=tmp_path / "ledger.log") as srv:
        for lines in (("X-Forwarded-Proto: https", "X-Forwarded-Ssl: off"),
                      ("X-Forwarded-Protocol: ssl", "X-Forwarded-Proto: http")):
            lean, flask = _both(srv.port, *H, *lines)
            assert lean == flask, lines


def test_lean_answers_when_the_database_cannot_be_opened(tmp_path):
    """A thread that has no database connection yet and cannot open one answers Flask's 503
    database_unavailable in the error shape (it used to log the exception and close the connection
    unanswered); a thread that already holds its connection answers as usual. Which thread takes
    which request is the pool's choice, so each answer is checked, not their mix."""
    folder = tmp_path / "db"
    folder.mkdir()
    with LedgerServer(f"sqlite:///{folder}/x.db", TOKENS, workers=1, threads=2,
                      log_path=tmp_path / "ledger.log") as srv:
        os.rename(folder, f"{folder}-gone")
        answers = []
        threads = [threading.Thread(target=lambda: answers.append(
            _exchange(srv.port, _raw(PATH, STALE, *H), wait=1.5))) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        shutil.rmtree(f"{folder}-gone")
    assert len(answers) == 3
    for head, body, closed in answers:
        assert not closed and head[0] in (b"HTTP/1.1 503 SERVICE UNAVAILABLE", b"HTTP/1.1 404 NOT FOUND"), head
        code = json.loads(body)["error"]["code"]
        assert code == ("database_unavailable" if head[0].endswith(b"UNAVAILABLE") else "operation_not_found"), body
