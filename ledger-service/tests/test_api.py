"""The HTTP contract (Flask test client), on SQLite and PostgreSQL."""

from urllib.parse import quote

import pytest

from conftest import auth


def _err(resp, status, code):
    assert resp.status_code == status, resp.get_json()
    body = resp.get_json()
    assert set(body["error"]) == {"code", "message", "details"}
    assert body["error"]["code"] == code, body
    return body["error"]


@pytest.fixture
def leased(client):
    assert client.put("/v1/jobs/j1", json={"pipeline": "article"}, headers=auth()).status_code == 201
    r = client.post("/v1/jobs/j1/lease", json={"owner": "exec-1", "ttl_s": 60}, headers=auth())
    assert r.status_code == 200
    return r.get_json()["fencing_token"]


def begin(client, token, payload=None, **extra):
    body = {"job_id": "j1", "action": "create_draft", "payload": payload or {"title": "T"}, "fencing_token": token}
    body.update(extra)
    return client.post("/v1/operations/begin", json=body, headers=auth())


def op_url(key, verb=""):
    return f"/v1/operations/{quote(key, safe='')}" + (f"/{verb}" if verb else "")


def test_job_put_creates_then_gets(client):
    r = client.put("/v1/jobs/j1", json={"pipeline": "article", "budgets": {"max_tool_calls": 5}}, headers=auth())
    assert r.status_code == 201
    job = r.get_json()
    assert (job["job_id"], job["task_version"], job["status"], job["budgets"]) == ("j1", 1, "active", {"max_tool_calls": 5})
    r = client.put("/v1/jobs/j1", json={"pipeline": "article"}, headers=auth())
    assert r.status_code == 200 and r.get_json()["created_at"] == job["created_at"]
    assert client.get("/v1/jobs/j1", headers=auth()).get_json()["job_id"] == "j1"


def test_scripted_gate_flow(client, leased):
    r = begin(client, leased)
    assert r.get_json()["decision"] == "dispatch"
    key = r.get_json()["operation"]["operation_key"]
    assert key == "acme:j1:v1:create_draft"
    assert begin(client, leased).get_json()["decision"] == "reconcile"
    r = client.post(op_url(key, "confirm"), json={"fencing_token": leased, "remote_id": 101, "receipt": {"link": "l"}},
                    headers=auth())
    assert r.status_code == 200 and r.get_json()["operation"]["state"] == "CONFIRMED"
    r = begin(client, leased).get_json()
    assert r["decision"] == "reuse_receipt" and r["receipt"]["remote_id"] == "101"
    _err(begin(client, leased, payload={"title": "other"}), 422, "digest_mismatch")
    r = client.post("/v1/jobs/j1/lease", json={"owner": "exec-2", "takeover": True}, headers=auth())
    assert r.get_json()["fencing_token"] == leased + 1
    e = _err(begin(client, leased, action="set_seo"), 409, "stale_fencing_token")
    assert e["details"] == {"given": leased, "current": leased + 1}
    r = client.get(op_url(key), headers=auth()).get_json()
    assert [e["to_state"] for e in r["events"]] == ["SENT", "CONFIRMED"]


def test_lease_held_and_needs_reconcile_listing(client, leased):
    begin(client, leased)
    e = _err(client.post("/v1/jobs/j1/lease", json={"owner": "exec-2"}, headers=auth()), 409, "lease_held")
    assert e["details"]["owner"] == "exec-1"
    r = client.post("/v1/jobs/j1/lease", json={"owner": "exec-2", "takeover": True}, headers=auth()).get_json()
    assert [o["state"] for o in r["needs_reconcile"]] == ["SENT"]
    r = client.post("/v1/jobs/j1/lease/renew", json={"owner": "exec-1", "fencing_token": leased}, headers=auth())
    _err(r, 409, "lease_lost")
    r = client.delete("/v1/jobs/j1/lease", json={"owner": "exec-2", "fencing_token": leased + 1}, headers=auth())
    assert r.status_code == 204


def test_outcome_endpoint_classifies(client, leased):
    key = begin(client, leased).get_json()["operation"]["operation_key"]
    r = client.post(op_url(key, "outcome"), json={"fencing_token": leased, "error_kind": "timeout"}, headers=auth())
    assert r.get_json()["classification"] == "unknown"
    assert r.get_json()["operation"]["state"] == "UNKNOWN"
    assert begin(client, leased).get_json()["decision"] == "reconcile"


def test_fail_then_retry_dispatches_next_attempt(client, leased):
    key = begin(client, leased).get_json()["operation"]["operation_key"]
    r = client.post(op_url(key, "fail"), json={"fencing_token": leased, "error": {"http_status": 400}}, headers=auth())
    assert r.get_json()["operation"]["state"] == "FAILED"
    r = begin(client, leased).get_json()
    assert (r["decision"], r["operation"]["attempt"]) == ("dispatch", 2)


def test_illegal_transition_is_409(client, leased):
    key = begin(client, leased).get_json()["operation"]["operation_key"]
    client.post(op_url(key, "confirm"), json={"fencing_token": leased, "remote_id": 1}, headers=auth())
    _err(client.post(op_url(key, "fail"), json={"fencing_token": leased}, headers=auth()), 409, "invalid_transition")
    _err(client.post(op_url(key, "confirm"), json={"fencing_token": leased, "remote_id": 2}, headers=auth()),
         409, "receipt_conflict")


def test_checkpoint_over_http(client, leased):
    r = client.post("/v1/jobs/j1/checkpoints", headers=auth(), json={
        "fencing_token": leased, "phase": "SOURCES_COLLECTED",
        "artifacts": [{"role": "sources", "uri": "file:///x", "sha256": "b" * 64}]})
    assert r.status_code == 201 and r.get_json()["job"]["phase"] == "SOURCES_COLLECTED"
    _err(client.post("/v1/jobs/j1/checkpoints", headers=auth(), json={"fencing_token": leased, "phase": "QA_PASSED"}),
         422, "phase_skipped")
    _err(client.post("/v1/jobs/j1/checkpoints", headers=auth(),
                     json={"fencing_token": leased, "phase": "BODY_GENERATED", "remote": {"token": "abc"}}),
         422, "secret_in_checkpoint")
    _err(client.post("/v1/jobs/j1/checkpoints", headers=auth(),
                     json={"fencing_token": leased, "phase": "BODY_GENERATED", "approval_status": "approved"}),
         403, "forbidden")
    hist = client.get("/v1/jobs/j1/checkpoints", headers=auth()).get_json()["checkpoints"]
    assert [c["phase"] for c in hist] == ["SOURCES_COLLECTED"]


def test_malformed_json_is_400(client, leased):
    r = client.post("/v1/operations/begin", data="{not json", headers={**auth(), "Content-Type": "application/json"})
    _err(r, 400, "malformed_json")
    r = client.post("/v1/operations/begin", json=[1, 2], headers=auth())
    _err(r, 400, "malformed_json")


def test_validation_is_422_with_field_messages(client, leased):
    e = _err(client.post("/v1/operations/begin", json={"job_id": "j1", "fencing_token": "1"}, headers=auth()),
             422, "validation_error")
    assert {"action", "fencing_token"} <= set(e["details"]["fields"])
    e = _err(begin(client, leased, surprise=True), 422, "validation_error")
    assert "surprise" in e["details"]["fields"]
    _err(client.post("/v1/operations/begin", json={"job_id": "j1", "action": "a", "fencing_token": leased},
                     headers=auth()), 422, "validation_error")


def test_auth_errors(client, leased):
    _err(client.post("/v1/operations/begin", json={}), 401, "unauthorized")
    _err(client.get("/v1/jobs/j1", headers=auth("nope")), 401, "unauthorized")
    _err(client.get("/v1/jobs/j1", headers={"Authorization": "Basic abc"}), 401, "unauthorized")
    _err(begin(client, leased).__class__ and client.post("/v1/operations/begin", headers=auth("editor-token"),
         json={"job_id": "j1", "action": "a", "payload": {}, "fencing_token": leased}), 403, "forbidden")
    # Another tenant's runner does not see the job at all.
    _err(client.get("/v1/jobs/j1", headers=auth("other-token")), 404, "job_not_found")


def test_unknown_routes_and_objects(client, leased):
    _err(client.get("/v1/nope", headers=auth()), 404, "not_found")
    _err(client.get("/v1/jobs/missing", headers=auth()), 404, "job_not_found")
    _err(client.get(op_url("acme:j1:v1:none"), headers=auth()), 404, "operation_not_found")


def test_health_and_openapi_and_metrics(client, leased):
    r = client.get("/health")
    assert r.status_code == 200 and r.get_json()["database"] == "ok" and "tenant" not in r.get_json()
    assert client.get("/health", headers=auth()).get_json()["role"] == "runner"
    _err(client.get("/health", headers=auth("bad")), 401, "unauthorized")
    spec = client.get("/openapi.json").get_json()
    assert "/v1/operations/begin" in spec["paths"] and "Begin" in spec["components"]["schemas"]
    begin(client, leased)
    assert 'durable_operations{state="SENT"} 1' in client.get("/metrics").get_data(as_text=True)


def test_batch_confirms_then_begins_each_item_on_its_own(client, leased):
    items = [{"job_id": "j1", "action": f"upload_media:{i}", "payload": {"i": i}, "fencing_token": leased}
             for i in range(3)]
    r = client.post("/v1/operations/batch", headers=auth(), json={"begin": items})
    assert [b["decision"] for b in r.get_json()["begin"]] == ["dispatch"] * 3
    keys = [b["operation"]["operation_key"] for b in r.get_json()["begin"]]
    bad = {**items[0], "payload": {"i": "changed"}}
    r = client.post("/v1/operations/batch", headers=auth(), json={
        "confirm": [{"operation_key": k, "fencing_token": leased, "remote_id": n} for n, k in enumerate(keys)]
        + [{"operation_key": "acme:j1:v1:nope", "fencing_token": leased, "remote_id": 1}],
        "begin": [items[1], bad]})
    body = r.get_json()
    assert [c.get("operation", {}).get("state") for c in body["confirm"]] == ["CONFIRMED"] * 3 + [None]
    assert body["confirm"][3]["error"]["code"] == "operation_not_found"
    assert body["begin"][0]["decision"] == "reuse_receipt" and body["begin"][0]["receipt"]["remote_id"] == "1"
    assert (body["begin"][1]["error"]["code"], body["begin"][1]["error"]["http_status"]) == ("digest_mismatch", 422)
    r = client.post("/v1/operations/batch", headers=auth(), json={"begin": items * 40})
    assert r.status_code == 422
