"""A heartbeat carried by a begin or a confirm (`heartbeat: {owner, live_s}`), on both backends:
the lease renewed as POST /v1/jobs/{id}/lease/renew would, after the call's own work, in its round
trip; never failing the call it rides on; never reviving a lease that a release, a cancel or a
takeover ended; the same answers from the Flask-free hot routes and Flask's."""

import time
from datetime import datetime

import pytest

from conftest import auth

OWNER = "n8n-exec-7"


@pytest.fixture
def token(client):
    r = client.post("/v1/jobs/hb/start", json={"owner": OWNER, "ttl_s": 600, "live_s": 0, "if_live": "wait"},
                    headers=auth())
    assert r.status_code == 201, r.get_json()
    return r.get_json()["fencing_token"]


def _begin(client, token, action="send", query="", **extra):
    return client.post(f"/v1/operations/begin{query}", headers=auth(),
                       json={"job_id": "hb", "action": action, "payload": {"n": 1}, "fencing_token": token, **extra})


def _confirm(client, key, token, query="", **extra):
    return client.post(f"/v1/operations/{key}/confirm{query}", headers=auth(),
                       json={"fencing_token": token, "remote_id": "r-1", **extra})


def _lease(client):
    return client.get("/v1/jobs/hb", headers=auth()).get_json()["lease"]


def _live_for(client):
    """Seconds the holder is still live for, as the ledger has it (None: never beat)."""
    until = _lease(client)["live_until"]
    return None if until is None else datetime.fromisoformat(until.replace("Z", "+00:00")).timestamp() - time.time()


@pytest.mark.parametrize("query", ["", "?via=flask"])  # the hot route, then Flask's
def test_begin_carries_the_first_beat_and_confirm_the_handover(client, token, query):
    assert _live_for(client) <= 0
    b = _begin(client, token, query=query, heartbeat={"owner": OWNER, "live_s": 10})
    assert b.status_code == 200 and b.get_json()["decision"] == "dispatch"
    assert b.get_json()["heartbeat"]["held"] is True
    assert 9 < _live_for(client) <= 10
    key = b.get_json()["operation"]["operation_key"]
    c = _confirm(client, key, token, query=query, heartbeat={"owner": OWNER, "live_s": 3})
    assert c.status_code == 200 and c.get_json()["operation"]["state"] == "CONFIRMED"
    assert c.get_json()["heartbeat"]["held"] is True
    assert 2 < _live_for(client) <= 3
    assert _lease(client)["fencing_token"] == token


def test_without_a_heartbeat_the_answers_are_as_before(client, token):
    b = _begin(client, token)
    assert "heartbeat" not in b.get_json()
    c = _confirm(client, b.get_json()["operation"]["operation_key"], token)
    assert "heartbeat" not in c.get_json()
    assert _live_for(client) <= 0


def test_a_beat_for_another_owner_is_not_held_and_changes_neither_the_call_nor_the_lease(client, token):
    b = _begin(client, token, heartbeat={"owner": "someone-else", "live_s": 10})
    assert b.status_code == 200 and b.get_json()["decision"] == "dispatch"  # the begin's own answer stands
    assert b.get_json()["heartbeat"] == {"held": False, "code": "lease_lost"}
    assert _live_for(client) <= 0


def test_a_beat_never_revives_a_released_lease(client, token):
    b = _begin(client, token)
    key = b.get_json()["operation"]["operation_key"]
    r = client.delete("/v1/jobs/hb/lease", json={"owner": OWNER, "fencing_token": token}, headers=auth())
    assert r.status_code == 204
    expired = _lease(client)["expires_at"]
    c = _confirm(client, key, token, heartbeat={"owner": OWNER, "live_s": 3})
    # The holder's own receipt is recorded (the token is still the lease's); the lease stays ended.
    assert c.status_code == 200 and c.get_json()["operation"]["state"] == "CONFIRMED"
    assert c.get_json()["heartbeat"] == {"held": False, "code": "lease_lost"}
    assert _lease(client)["expires_at"] == expired and _live_for(client) <= 0


def test_a_runner_of_another_tenant_beats_nothing(client, token):
    r = client.post("/v1/operations/begin", headers=auth("other-token"), json={
        "job_id": "hb", "action": "send", "payload": {}, "fencing_token": token, "heartbeat": {"owner": OWNER, "live_s": 10}})
    assert r.status_code == 404 and "heartbeat" not in r.get_json()
    assert _live_for(client) <= 0


def test_a_refused_begin_beats_nothing(client, token):
    client.post("/v1/jobs/hb/start", json={"owner": "exec-2", "takeover": True}, headers=auth())  # token + 1
    b = _begin(client, token, heartbeat={"owner": OWNER, "live_s": 10})
    assert b.status_code == 409 and b.get_json()["error"]["code"] == "stale_fencing_token"
    assert _lease(client)["owner"] == "exec-2" and _live_for(client) is None


@pytest.mark.parametrize("beat, field", [
    ({"owner": OWNER}, "live_s"),
    ({"live_s": 10}, "owner"),
    ({"owner": OWNER, "live_s": 7200}, "live_s"),
    ({"owner": OWNER, "live_s": None}, "live_s"),
    ({"owner": OWNER, "live_s": 10, "ttl_s": 5}, "ttl_s"),
])
def test_a_bad_heartbeat_refuses_the_call_before_anything_is_written(client, token, beat, field):
    b = _begin(client, token, heartbeat=beat)
    assert b.status_code == 422, b.get_json()
    assert field in b.get_json()["error"]["details"]["fields"]["heartbeat"]
    assert client.get("/v1/jobs/hb/operations", headers=auth()).get_json()["operations"] == []
    assert _live_for(client) <= 0


def test_the_batch_takes_no_heartbeat(client, token):
    r = client.post("/v1/operations/batch", headers=auth(), json={"begin": [
        {"job_id": "hb", "action": "a", "payload": {}, "fencing_token": token, "heartbeat": {"owner": OWNER, "live_s": 1}}]})
    assert r.status_code == 422
    assert r.get_json()["error"]["details"]["fields"]["begin"]["0"] == {"heartbeat": ["Unknown field."]}


def test_a_beat_the_database_refuses_leaves_the_call_answered(client, token, monkeypatch):
    """The begin's own transaction committed (its dispatch is SENT): the caller gets that answer,
    only the beat is reported lost; a 503 would hide a dispatch the ledger recorded."""
    from durable_ledger.jobs import leases
    from durable_ledger.store.db import OperationalError

    def unavailable(*args, **kwargs):
        raise OperationalError("database is locked")

    monkeypatch.setattr(leases, "renew_lease", unavailable)
    b = _begin(client, token, heartbeat={"owner": OWNER, "live_s": 10})
    assert b.status_code == 200 and b.get_json()["decision"] == "dispatch"
    assert b.get_json()["heartbeat"] == {"held": False, "code": "database_unavailable"}
    assert b.get_json()["operation"]["state"] == "SENT"
    assert _live_for(client) <= 0


def test_a_beat_that_fails_for_another_reason_is_not_hidden(client, token, monkeypatch):
    from durable_ledger.jobs import leases

    def broken(*args, **kwargs):
        raise RuntimeError("a bug, not an outage")

    monkeypatch.setattr(leases, "renew_lease", broken)
    with pytest.raises(RuntimeError):  # the test client passes the app's exceptions on (a 500 when served)
        _begin(client, token, heartbeat={"owner": OWNER, "live_s": 10})
