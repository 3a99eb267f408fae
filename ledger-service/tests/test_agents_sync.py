"""Session mapping, item sync, stream rebuild and restart, against the Agents API stand-in."""

import pytest
import requests
from agents_standin import (bound_job, item_event, message_item,
                            turn_body)
from conftest import TOKENS, auth
from servers import LedgerServer

from durable_ledger.agents.openai_client import get_client
from durable_ledger.store.agent_models import SessionBinding, SessionItem
from durable_ledger.agents.stream import rebuild
from durable_ledger.app import create_app
from durable_ledger.kernel.config import Config
from durable_ledger.store.db import db


@pytest.fixture
def standin(standin):
    standin.default_tenant = "acme"  # sessions are bound only for the tenant in their metadata
    return standin


class PatientServer(LedgerServer):
    """servers.LedgerServer, but a slow first worker boot (importing openai) is not a failure."""

    def start(self, timeout=60):
        return super().start(timeout)


def test_sync_stores_250_items_over_3_pages(client, standin):
    standin.add_session("sess_1", items=[message_item(i) for i in range(250)])
    bound_job(client, auth(), lease=False)
    r = client.post("/v1/jobs/j1/session/sync", json={}, headers=auth())
    assert r.status_code == 200, r.get_json()
    body = r.get_json()
    assert body["item_count"] == 250
    assert body["session_status"] == "idle"
    assert body["turns"] == [{"turn_id": "turn_1", "status": "completed", "error": None}]
    assert body["required_actions"] == [] and body["stale"] is False
    assert standin.requests["GET items"] == 3
    with db.connection_context():
        ids = [i for (i,) in SessionItem.select(SessionItem.item_id).order_by(SessionItem.item_id).tuples()]
    assert ids == [f"item_{i:06d}" for i in range(250)]


def test_sync_never_overwrites_a_terminal_item(client, standin):
    standin.add_session("sess_1", items=[message_item(0, status="completed", text="final")])
    bound_job(client, auth(), lease=False)
    assert client.post("/v1/jobs/j1/session/sync", json={}, headers=auth()).status_code == 200
    standin.items["sess_1"] = [message_item(0, status="in_progress", text="partial")]  # an older copy
    assert client.post("/v1/jobs/j1/session/sync", json={}, headers=auth()).status_code == 200
    with db.connection_context():
        row = SessionItem.get(SessionItem.item_id == "item_000000")
    assert (row.status, row.body["content"][0]["text"]) == ("completed", "final")


def test_bind_refuses_a_second_session_for_the_job(client, standin):
    standin.add_session("sess_1")
    standin.add_session("sess_2")
    bound_job(client, auth(), lease=False)
    r = client.put("/v1/jobs/j1/session", json={"session_id": "sess_1"}, headers=auth())
    assert r.status_code == 200
    r = client.put("/v1/jobs/j1/session", json={"session_id": "sess_2"}, headers=auth())
    assert r.status_code == 409 and r.get_json()["error"]["code"] == "session_conflict"
    client.put("/v1/jobs/j2", json={}, headers=auth())
    r = client.put("/v1/jobs/j2/session", json={"session_id": "sess_1"}, headers=auth())
    assert r.status_code == 409


def test_sync_unknown_job_session_is_404(client, standin):
    client.put("/v1/jobs/j1", json={}, headers=auth())
    r = client.post("/v1/jobs/j1/session/sync", json={}, headers=auth())
    assert r.status_code == 404 and r.get_json()["error"]["code"] == "session_not_bound"


def test_app_restart_finds_the_session(client, standin, database):
    standin.add_session("sess_1", items=[message_item(i) for i in range(3)])
    bound_job(client, auth(), lease=False)
    # A new app instance on the same database.
    app2 = create_app(Config(database_url=database, bootstrap_tokens=TOKENS, log_level="WARNING"))
    r = app2.test_client().post("/v1/jobs/j1/session/sync", json={}, headers=auth())
    assert r.status_code == 200 and r.get_json()["session_id"] == "sess_1" and r.get_json()["item_count"] == 3
    # A new process (`durable-ledger serve`) on the same database.
    if not db.is_closed():
        db.close()
    with PatientServer(database, TOKENS, workers=1, threads=2) as server:
        r = requests.post(server.url + "/v1/jobs/j1/session/sync", json={}, headers=auth(), timeout=20)
        assert r.status_code == 200, r.text
        assert r.json()["session_id"] == "sess_1"
    assert "POST " not in " ".join(standin.requests)  # nothing was created or sent
    with db.connection_context():
        assert SessionBinding.select().count() == 1


def test_stream_rebuild_merges_buffered_events(client, standin):
    standin.add_session("sess_1", items=[message_item(0, status="in_progress"), message_item(1)])
    standin.stream_events["sess_1"] = [
        item_event("sess_1", 1, message_item(0, status="completed", text="done"), "done"),
        item_event("sess_1", 2, message_item(2)),
    ]
    bound_job(client, auth(), lease=False)
    with db.connection_context():
        binding = SessionBinding.get()
        stats = rebuild(get_client(), binding, buffer_size=100)
        assert stats["stale"] is False and stats["merged"] + stats["live"] == 2
        rows = {r.item_id: r.status for r in SessionItem.select()}
    assert rows == {"item_000000": "completed", "item_000001": "completed", "item_000002": "completed"}


def test_stream_rebuild_full_buffer_marks_stale(client, standin):
    standin.add_session("sess_1", items=[message_item(0)], turns=[turn_body("sess_1", "turn_1")])
    standin.stream_events["sess_1"] = [item_event("sess_1", n, message_item(n + 10)) for n in range(20)]
    standin.items_wait_for_stream = True
    bound_job(client, auth(), lease=False)
    with db.connection_context():
        stats = rebuild(get_client(), SessionBinding.get(), buffer_size=3, max_rebuilds=2)
        assert stats == {"rebuilds": 2, "merged": 0, "live": 0, "stale": True}
        assert SessionBinding.get().stale is True
    r = client.get("/v1/jobs/j1/session", headers=auth())
    assert r.get_json()["stale"] is True
    # A full re-read makes the stored view current again.
    assert client.post("/v1/jobs/j1/session/sync", json={}, headers=auth()).get_json()["stale"] is False
