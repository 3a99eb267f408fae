"""POST /v1/jobs/{id}/versions with a target version (what Start Job's Task Version calls), on both
backends: a higher version starts (new default keys, no approval carries over), the current one
again is a no-op, a lower one is refused 409 task_version_lower, and only under the current token."""

from conftest import auth
from durable_ledger.store.db import db
from durable_ledger.store.models import AuditLog


def _start(client):
    client.put("/v1/jobs/v1job", json={}, headers=auth())
    return client.post("/v1/jobs/v1job/lease", json={"owner": "n8n-exec-1"}, headers=auth()).get_json()["fencing_token"]


def _versions(client, body):
    return client.post("/v1/jobs/v1job/versions", json=body, headers=auth())


def _bumps():
    with db.connection_context():
        return [r.detail for r in AuditLog.select().where(AuditLog.action == "version_bumped").order_by(AuditLog.id)]


def test_versions_starts_the_asked_version_once(client):
    tok = _start(client)
    first = client.post("/v1/operations/begin", headers=auth(), json={
        "job_id": "v1job", "action": "send", "payload": {"a": 1}, "fencing_token": tok}).get_json()
    assert first["operation"]["operation_key"] == "acme:v1job:v1:send"
    r = _versions(client, {"fencing_token": tok, "task_version": 3})
    assert (r.status_code, r.get_json()["task_version"]) == (200, 3)
    assert _versions(client, {"fencing_token": tok, "task_version": 3}).get_json()["task_version"] == 3  # no-op
    assert _bumps() == [{"from": 1, "to": 3}]
    again = client.post("/v1/operations/begin", headers=auth(), json={
        "job_id": "v1job", "action": "send", "payload": {"a": 2}, "fencing_token": tok}).get_json()
    assert (again["decision"], again["operation"]["operation_key"]) == ("dispatch", "acme:v1job:v3:send")
    assert _versions(client, {"fencing_token": tok}).get_json()["task_version"] == 4  # the next, as before


def test_versions_refuses_a_lower_version_and_a_stale_token(client):
    tok = _start(client)
    assert _versions(client, {"fencing_token": tok, "task_version": 2}).status_code == 200
    err = _versions(client, {"fencing_token": tok, "task_version": 1}).get_json()["error"]
    assert err["code"] == "task_version_lower" and err["details"] == {"field": "task_version", "given": 1,
                                                                      "current": 2}
    assert "set Task Version to 2 or higher" in err["message"]
    client.post("/v1/jobs/v1job/lease", json={"owner": "n8n-exec-2", "takeover": True}, headers=auth())
    r = _versions(client, {"fencing_token": tok, "task_version": 5})
    assert (r.status_code, r.get_json()["error"]["code"]) == (409, "stale_fencing_token")
    assert client.get("/v1/jobs/v1job", headers=auth()).get_json()["task_version"] == 2
    assert _bumps() == [{"from": 1, "to": 2}]
