"""The ledger's own database failing: every door answers 503 `database_unavailable` in the error
shape (never a traceback, a 500 or a hang), /health says so, nothing is claimed that the database
does not hold, and the ledger recovers by itself once the database is back. The whole faults
(PostgreSQL killed, the link cut at COMMIT, a full disk) run in tests/dbfault."""

import socket
import sqlite3
import threading

import psycopg2
import pytest
from peewee import OperationalError

import durable_ledger.app as app_module
from durable_ledger.kernel.config import Config
from durable_ledger.store.db import database_unavailable, db, init_database
from conftest import _pg_admin, auth

BEGIN = {"job_id": "db-1", "action": "create_order", "payload": {"order": 1}, "fencing_token": 1}


def _job(client, job_id="db-1"):
    assert client.put(f"/v1/jobs/{job_id}", json={}, headers=auth()).status_code in (200, 201)
    r = client.post(f"/v1/jobs/{job_id}/lease", headers=auth(), json={"owner": "w"})
    assert r.status_code == 200 and r.get_json()["fencing_token"] == 1, r.get_json()


def _error(r, status=503, code="database_unavailable"):
    body = r.get_json()
    assert r.status_code == status, (r.status_code, body)
    assert set(body) >= {"error"} and set(body["error"]) == {"code", "message", "details"}, body
    assert body["error"]["code"] == code, body
    return body


def _operations(client, job_id):
    r = client.get(f"/v1/jobs/{job_id}/operations", headers=auth())
    assert r.status_code == 200, r.get_json()
    return r.get_json()["operations"]


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_database_unavailable_sqlite_lock_past_the_busy_timeout(client, database):
    """Another process holds the write lock longer than the busy timeout: begin (the hot route),
    a job write (Flask) and confirm answer 503 and claim nothing; once the lock is gone, the
    same calls go through on the same connections."""
    _job(client)
    client.get("/health")  # the request thread's connection exists now: shorten its busy timeout
    db.execute_sql("PRAGMA busy_timeout = 150")
    other = sqlite3.connect(database.removeprefix("sqlite:///"), isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    try:
        body = _error(client.post("/v1/operations/begin", json=BEGIN, headers=auth()))
        assert body["error"]["details"]["driver_error"].startswith("OperationalError"), body
        _error(client.put("/v1/jobs/db-2", json={}, headers=auth()))
        # WAL: readers are not blocked by a writer, so the health check still reaches the file;
        # it names the failure of a moment ago.
        h = client.get("/health")
        assert h.status_code == 200 and h.get_json()["last_database_error"]["driver_error"].startswith(
            "OperationalError"), h.get_json()
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert _operations(client, "db-1") == []  # the refused begin claimed nothing
    r = client.post("/v1/operations/begin", json=BEGIN, headers=auth())
    assert r.status_code == 200 and r.get_json()["decision"] == "dispatch", r.get_json()
    op = r.get_json()["operation"]
    r = client.post(f"/v1/operations/{op['operation_key']}/confirm", json={
        "fencing_token": 1, "remote_id": "o-1", "receipt": {"id": "o-1"}}, headers=auth())
    assert r.status_code == 200 and r.get_json()["operation"]["state"] == "CONFIRMED", r.get_json()


def test_database_unavailable_tells_outages_from_sql_mistakes(database):
    """Which driver errors are an outage (503) and which a bug (still a 500): on SQLite the result
    code decides, on PostgreSQL every OperationalError / InterfaceError is one."""
    busy = OperationalError(sqlite3.OperationalError("database is locked"))
    full = OperationalError(sqlite3.OperationalError("database or disk is full"))
    mistake = OperationalError(sqlite3.OperationalError("no such table: nowhere"))
    refused = OperationalError(psycopg2.OperationalError("connection to server failed: Connection refused"))
    assert database_unavailable(ValueError("x")) is None
    if database.startswith("sqlite"):
        assert database_unavailable(busy) and database_unavailable(full)
        assert database_unavailable(mistake) is None
    else:
        assert database_unavailable(refused) == "OperationalError"


@pytest.mark.parametrize("backend", ["postgres"], indirect=True)
def test_database_unavailable_pool_after_the_server_dropped_its_connections(client, database):
    """PostgreSQL restarted (here: every backend of the database terminated): pooled connections
    checked in a moment ago are handed out without a probe, so one request may meet a dead one.
    That request answers 503 in the error shape, /health answers 503 or ok, and the pool probes
    every other connection at its next check-out: the next requests are served on fresh ones."""
    _job(client)
    barrier = threading.Barrier(3)

    def hold_one():  # three connections in the pool, all checked in just now
        db.connect(reuse_if_open=True)
        db.execute_sql("SELECT 1")
        barrier.wait(10)
        db.close()

    threads = [threading.Thread(target=hold_one) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    dbname = database.rsplit("/", 1)[1]
    admin = _pg_admin()
    with admin.cursor() as cur:
        cur.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = %s", (dbname,))
        assert cur.fetchone()[0] >= 3
    admin.close()
    answers = [client.post("/v1/operations/begin", json=BEGIN, headers=auth()) for _ in range(3)]
    failed = [r for r in answers if r.status_code != 200]
    assert len(failed) <= 1, [(r.status_code, r.get_json()) for r in answers]
    for r in failed:
        _error(r)
    assert answers[-1].status_code == 200
    assert client.get("/health").get_json()["database"] == "ok"
    ops = _operations(client, "db-1")
    assert len(ops) == 1 and ops[0]["state"] == "SENT", ops


def test_database_unavailable_health_while_postgres_refuses(monkeypatch):
    """A ledger whose PostgreSQL refuses connections: /health answers 503 with
    `database: unreachable` and the error shape, a begin (hot route) and a job read (Flask) answer
    503 `database_unavailable`."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there
    url = f"postgresql://postgres@127.0.0.1:{port}/nowhere"
    # The app starts while the database is down (serve's workers do: the master migrated before).
    monkeypatch.setattr(app_module, "_prepare_database", lambda *_a: init_database(url))
    monkeypatch.setattr(app_module, "_configure_console_sessions", lambda app, _cfg: setattr(app, "secret_key", "x"))
    client = app_module.create_app(Config(database_url=url, log_level="WARNING"), init_schema=False).test_client()
    body = _error(client.get("/health"))
    assert body["status"] == "unavailable" and body["database"] == "unreachable", body
    _error(client.post("/v1/operations/begin", json=BEGIN, headers=auth()))
    _error(client.get("/v1/jobs/db-1", headers=auth()))
