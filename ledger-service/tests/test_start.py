"""POST /v1/jobs/{id}/start (Start Job in one call), on both backends: the answers, refusals and
timeline entries of PUT /v1/jobs/{id} + POST .../lease + POST .../versions, from one request, and
one winner when several executions start the same new job at once."""

from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import TOKENS, auth
from durable_ledger.store.db import db
from durable_ledger.store.models import AuditLog
from servers import LedgerServer


def _start(client, body, job="sj"):
    return client.post(f"/v1/jobs/{job}/start", json=body, headers=auth())


def _timeline(job="sj"):
    with db.connection_context():
        return [(r.action, r.detail) for r in AuditLog.select().order_by(AuditLog.id)
                if r.job is not None and r.job.job_id == job]


def _actions(job="sj"):
    return [a for a, _ in _timeline(job)]


def test_start_creates_the_job_and_takes_the_first_lease(client):
    r = _start(client, {"owner": "exec-1", "task_version": 2, "pipeline": "generic", "budgets": {"max_attempts": 3}})
    body = r.get_json()
    assert (r.status_code, body["created"], body["owner"], body["fencing_token"]) == (201, True, "exec-1", 1)
    assert (body["job"]["task_version"], body["job"]["budgets"], body["needs_reconcile"]) == (2, {"max_attempts": 3}, [])
    assert body["job"]["lease"]["fencing_token"] == 1 and body["job"]["fencing_token"] == 1
    assert _timeline() == [("job_created", {"task_version": 2, "pipeline": "generic"}),
                           ("lease_acquired", {"owner": "exec-1", "fencing_token": 1})]


def test_start_answers_as_the_three_routes_do(client):
    """The same body the lease route answers (the job after the version started), on a job that exists."""
    client.put("/v1/jobs/old", json={}, headers=auth())
    old = client.post("/v1/jobs/old/lease", json={"owner": "exec-1"}, headers=auth()).get_json()
    old["job"] = client.post("/v1/jobs/old/versions", json={"fencing_token": old["fencing_token"], "task_version": 3},
                             headers=auth()).get_json()
    _start(client, {"owner": "exec-1"}, job="new")
    r = _start(client, {"owner": "exec-1", "task_version": 3}, job="new")
    new = r.get_json()
    assert (r.status_code, new.pop("created")) == (200, False)

    def shape(b):  # what differs between two jobs: their ids and times
        return {**b, "expires_at": None, "job": {**b["job"], "job_id": None, "created_at": None, "updated_at": None,
                                                "lease": {**b["job"]["lease"], "expires_at": None}}}
    assert shape(new) == shape(old)
    assert _actions("new") == ["job_created", "lease_acquired", "version_bumped"] and _actions("old")[-1] == "version_bumped"


def test_start_same_owner_extends_and_keeps_the_token(client):
    first = _start(client, {"owner": "exec-1", "ttl_s": 60}).get_json()
    again = _start(client, {"owner": "exec-1", "ttl_s": 600}).get_json()
    assert again["fencing_token"] == first["fencing_token"] == 1 and again["expires_at"] > first["expires_at"]
    assert _actions() == ["job_created", "lease_acquired"]


def test_start_refuses_a_live_lease_and_records_it(client):
    _start(client, {"owner": "exec-1"})
    r = _start(client, {"owner": "exec-2", "task_version": 5})
    err = r.get_json()["error"]
    assert (r.status_code, err["code"], err["details"]["owner"], err["details"]["option"]) == (
        409, "lease_held", "exec-1", "takeover")
    assert "turn on Start Job's option Take Over" in err["message"]
    # refused whole: no version started, and the refusal is on the timeline (not rolled back)
    assert client.get("/v1/jobs/sj", headers=auth()).get_json()["task_version"] == 1
    assert _actions() == ["job_created", "lease_acquired", "refused:lease_held"]


def test_start_takes_over_and_starts_the_version_under_the_new_token(client):
    tok = _start(client, {"owner": "exec-1"}).get_json()["fencing_token"]
    r = _start(client, {"owner": "exec-2", "takeover": True, "task_version": 2}).get_json()
    assert (r["fencing_token"], r["owner"], r["job"]["task_version"]) == (tok + 1, "exec-2", 2)
    assert _timeline()[2:] == [
        ("lease_taken_over", {"owner": "exec-2", "previous_owner": "exec-1", "fencing_token": 2}),
        ("version_bumped", {"from": 1, "to": 2})]
    stale = client.post("/v1/jobs/sj/versions", json={"fencing_token": tok, "task_version": 3}, headers=auth())
    assert stale.get_json()["error"]["code"] == "stale_fencing_token"


def test_start_refuses_a_lower_version_before_the_lease(client):
    _start(client, {"owner": "exec-1", "task_version": 3})
    r = _start(client, {"owner": "exec-2", "takeover": True, "task_version": 2})
    err = r.get_json()["error"]
    assert (r.status_code, err["code"], err["details"]) == (
        409, "task_version_lower", {"field": "task_version", "given": 2, "current": 3})
    assert "set Task Version to 3 or higher" in err["message"]
    assert client.get("/v1/jobs/sj", headers=auth()).get_json()["lease"]["owner"] == "exec-1"  # untouched
    assert _actions() == ["job_created", "lease_acquired"]


def test_start_keeps_the_job_version_when_asked_to(client):
    _start(client, {"owner": "exec-1", "task_version": 3})
    r = _start(client, {"owner": "exec-2", "takeover": True, "task_version": 2, "if_lower": "keep"}).get_json()
    assert (r["fencing_token"], r["job"]["task_version"]) == (2, 3)
    assert _actions()[-1] == "lease_taken_over"


@pytest.mark.parametrize("body, field", [
    ({}, "owner"), ({"owner": "x", "ttl_s": 0}, "ttl_s"), ({"owner": "x", "if_lower": "maybe"}, "if_lower"),
    ({"owner": "x", "session_id": "s"}, "session_id"), ({"owner": "x", "pipeline": "nope"}, "pipeline"),
    ({"owner": "x", "task_version": 0}, "task_version")])
def test_start_refuses_bad_bodies_with_nothing_written(client, body, field):
    r = _start(client, body)
    assert r.status_code == 422, r.get_json()
    assert field in str(r.get_json()["error"])
    assert client.get("/v1/jobs/sj", headers=auth()).status_code == 404


def test_start_needs_a_runner(client):
    r = client.post("/v1/jobs/sj/start", json={"owner": "x"}, headers=auth("editor-token"))
    assert r.status_code == 403


def test_start_one_winner_among_concurrent_starts(database, tmp_path):
    """Eight executions start the same new job at once through two worker processes: one job row,
    one lease holder, the others refused 409 lease_held, and the version started once."""
    import requests
    server = LedgerServer(database, TOKENS, workers=2, threads=4, log_path=tmp_path / "ledger.log")
    server.start()
    try:
        def go(i):
            r = requests.post(server.url + "/v1/jobs/race/start", headers=auth(), timeout=30,
                              json={"owner": f"exec-{i}", "task_version": 1 + i % 2})
            return r.status_code, r.json().get("error", {}).get("code")
        with ThreadPoolExecutor(8) as pool:
            answers = sorted(pool.map(go, range(8)))
    finally:
        server.stop()
    winners = [a for a in answers if a[0] in (200, 201)]
    assert len(winners) == 1 and winners[0][0] == 201, answers
    assert all(a[0] == 409 and a[1] in ("lease_held", "task_version_lower") for a in answers if a not in winners)
    acts = _actions("race")
    assert acts.count("job_created") == 1 and acts.count("lease_acquired") == 1 and acts.count("version_bumped") == 0


# --- liveness (issue 37): a takeover that waits for a live holder


def _waiting(owner, **extra):
    return {"owner": owner, "takeover": True, "if_live": "wait", "live_s": 10, **extra}


def test_start_takeover_waits_for_a_live_holder_and_writes_nothing(client):
    first = _start(client, _waiting("exec-1")).get_json()
    assert first["holder_working"] is True and first["live_until"]
    r = _start(client, _waiting("exec-2", task_version=2))
    err = r.get_json()["error"]
    assert (r.status_code, err["code"], err["details"]["owner"], err["details"]["fencing_token"]) == (
        409, "holder_live", "exec-1", 1)
    assert 0 < err["details"]["retry_after_s"] <= 1
    # nothing written: no takeover, no version, no timeline entry per poll
    assert client.get("/v1/jobs/sj", headers=auth()).get_json()["task_version"] == 1
    assert _actions() == ["job_created", "lease_acquired"]


def test_start_takeover_of_a_holder_whose_heartbeat_lapsed_is_at_once(client):
    first = _start(client, _waiting("exec-1")).get_json()
    beat = client.post("/v1/jobs/sj/lease/renew", headers=auth(),
                       json={"owner": "exec-1", "fencing_token": first["fencing_token"], "live_s": 0})
    assert beat.status_code == 200 and beat.get_json()["holder_working"] is False
    r = _start(client, _waiting("exec-2"))
    assert (r.status_code, r.get_json()["owner"], r.get_json()["fencing_token"]) == (200, "exec-2", 2)
    assert _actions()[-1] == "lease_taken_over"
    # the old holder's next heartbeat is refused: it was taken over
    late = client.post("/v1/jobs/sj/lease/renew", headers=auth(),
                       json={"owner": "exec-1", "fencing_token": 1, "live_s": 10})
    assert (late.status_code, late.get_json()["error"]["code"]) == (409, "lease_lost")


def test_start_heartbeat_keeps_the_holder_live(client):
    _start(client, {**_waiting("exec-1"), "live_s": 0})
    beat = client.post("/v1/jobs/sj/lease/renew", headers=auth(),
                       json={"owner": "exec-1", "fencing_token": 1, "live_s": 10})
    assert beat.get_json()["holder_working"] is True
    assert _start(client, _waiting("exec-2")).get_json()["error"]["code"] == "holder_live"


def test_start_takeover_without_liveness_fences_out_as_before(client):
    """A holder that never beat (an API client, Start Job before 1.4) and a caller that does not
    wait (if_live absent: take_over) keep the old rule: taken over at once."""
    _start(client, {"owner": "exec-1"})
    assert _start(client, _waiting("exec-2")).get_json()["fencing_token"] == 2
    r = _start(client, {"owner": "exec-3", "takeover": True})  # exec-2 is live, but this caller forces
    assert (r.status_code, r.get_json()["fencing_token"]) == (200, 3)


def test_start_same_owner_renews_its_liveness(client):
    _start(client, {**_waiting("exec-1"), "live_s": 0})
    again = _start(client, _waiting("exec-1")).get_json()
    assert (again["fencing_token"], again["holder_working"]) == (1, True)


def test_start_liveness_out_of_range_is_refused(client):
    r = _start(client, {"owner": "exec-1", "live_s": 7200})
    assert r.status_code in (400, 422) and r.get_json()["error"]["code"]
