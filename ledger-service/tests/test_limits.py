"""Hostile input never reaches a 500 (issue 13), on SQLite and PostgreSQL.

Every refusal is a 4xx in the one error shape; nothing half-written is left behind.
"""

import io
import json
from urllib.parse import quote

import pytest

from conftest import TOKENS, auth
from durable_ledger.app import create_app
from durable_ledger.kernel.config import Config


def _err(resp, status, code=None):
    assert resp.status_code == status, (resp.status_code, resp.get_data(as_text=True)[:500])
    body = resp.get_json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "details"}, body
    if code:
        assert body["error"]["code"] == code, body
    return body["error"]


def _raw(client, method, url, text, token="runner-token"):
    return client.open(url, method=method, data=text.encode("utf-8", "surrogatepass"),
                       headers={**auth(token), "Content-Type": "application/json"})


@pytest.fixture
def leased(client):
    assert client.put("/v1/jobs/j1", json={"pipeline": "article"}, headers=auth()).status_code == 201
    r = client.post("/v1/jobs/j1/lease", json={"owner": "exec-1", "ttl_s": 60}, headers=auth())
    return r.get_json()["fencing_token"]


def _begin_body(token, **extra):
    body = {"job_id": "j1", "action": "create_draft", "payload": {"title": "T"}, "fencing_token": token}
    body.update(extra)
    return body


def op_url(key, verb=""):
    return f"/v1/operations/{quote(key, safe='')}" + (f"/{verb}" if verb else "")


def _dispatched(client, token, action="create_draft"):
    r = client.post("/v1/operations/begin", json=_begin_body(token, action=action), headers=auth())
    assert r.get_json()["decision"] == "dispatch", r.get_json()
    return r.get_json()["operation"]["operation_key"]


# -- 1. depth, surrogates, NUL, integer and string ranges, dates -------------------------------

def test_limits_deep_json_is_refused_not_500(client, leased):
    deep = "[" * 5000 + "]" * 5000
    for url, method in (("/v1/operations/begin", "POST"), ("/v1/jobs/j1", "PUT"), ("/v1/jobs/j1/checkpoints", "POST"),
                        ("/v1/approvals", "POST"), ("/v1/operations/batch", "POST")):
        body = '{"job_id": "j1", "action": "a", "fencing_token": 1, "payload": ' + deep + "}"
        e = _err(_raw(client, method, url, body, "admin-token"), 400, "malformed_json")
        assert e["details"]["max_depth"] == 64
    # 65 levels (under Python's recursion limit) is still refused: the cap is ours, not the parser's.
    _err(_raw(client, "POST", "/v1/operations/begin",
              json.dumps(_begin_body(leased, payload=json.loads("[" * 65 + "]" * 65)))), 400, "malformed_json")
    ok = json.loads("[" * 60 + "]" * 60)
    r = client.post("/v1/operations/begin", json=_begin_body(leased, payload={"deep": ok}), headers=auth())
    assert r.status_code == 200


@pytest.mark.parametrize("where", ["payload", "action", "job_id", "operation_key", "phases", "dict_key"])
def test_limits_lone_surrogates_and_nul_are_refused(client, leased, where):
    for bad in ("\\ud800", "a\\u0000b", "\\udfff tail"):
        if where == "phases":
            text = '{"phases": ["A", "%s"]}' % bad
            r = _raw(client, "PUT", "/v1/jobs/j2", text)
        elif where == "dict_key":
            text = json.dumps(_begin_body(leased)).replace('"title"', '"%s"' % bad)
            r = _raw(client, "POST", "/v1/operations/begin", text)
        else:
            body = json.dumps(_begin_body(leased, **{where: "X"})).replace('"X"', '"%s"' % bad)
            r = _raw(client, "POST", "/v1/operations/begin", body)
        _err(r, 422, "invalid_value")


def test_limits_path_job_id_and_key_are_validated(client, leased):
    for job_id in ("%00", "a%00b", "%ED%A0%80", "x" * 256, "%01"):
        _err(client.put(f"/v1/jobs/{job_id}", json={}, headers=auth()), 422, "invalid_value")
        _err(client.get(f"/v1/jobs/{job_id}/report", headers=auth()), 422, "invalid_value")
    for key in ("a%00b", "k" * 513, "a%7Fb"):
        _err(client.get(f"/v1/operations/{key}", headers=auth()), 422, "invalid_value")
        _err(client.post(f"/v1/operations/{key}/confirm", json={"fencing_token": 1, "remote_id": 1},
                         headers=auth()), 422, "invalid_value")
    _err(client.get("/v1/reviews?job_id=a%00b", headers=auth("editor-token")), 422, "invalid_value")
    _err(client.get("/v1/jobs/j1/operations?state=SENT%00", headers=auth()), 422, "invalid_value")
    _err(client.delete(f"/v1/approvals/{2 ** 63}", headers=auth("approver-token")), 422, "invalid_value")


@pytest.mark.parametrize("value", [2 ** 63, 2 ** 31, -(2 ** 63) - 1, 10 ** 30])
def test_limits_integers_beyond_the_columns_are_refused(client, leased, value):
    _err(client.post("/v1/operations/begin", json=_begin_body(value), headers=auth()), 422)
    _err(client.put("/v1/jobs/j2", json={"task_version": value}, headers=auth()), 422)
    _err(client.post("/v1/jobs/j1/checkpoints", json={"fencing_token": value, "phase": "SOURCES_COLLECTED"},
                     headers=auth()), 422)
    _err(client.put("/v1/jobs/j3", json={"budgets": {"max_tool_calls": value}}, headers=auth()), 422)
    _err(client.post("/v1/jobs/j1/lease/renew", json={"owner": "exec-1", "fencing_token": value}, headers=auth()), 422)
    # Free-form JSON (payloads, receipts) may not carry integers no client can represent either.
    if abs(value) >= 2 ** 63:
        _err(client.post("/v1/operations/begin", json=_begin_body(leased, payload={"n": value}), headers=auth()),
             422, "invalid_value")


def test_limits_far_future_approval_is_refused(client, leased):
    base = {"job_id": "j1", "task_version": 1, "action": "publish", "content_digest": "a" * 64, "target": "t"}
    for when in ("9999-12-31T23:59:59-14:00", "10000-01-01T00:00:00Z", "2300-01-01T00:00:00Z", "not a date"):
        _err(client.post("/v1/approvals", json={**base, "expires_at": when}, headers=auth("approver-token")), 422)
    r = client.post("/v1/approvals", json={**base, "expires_at": "2099-01-01T00:00:00Z"}, headers=auth("approver-token"))
    assert r.status_code == 201, r.get_json()


def test_limits_remote_id_longer_than_the_column_is_refused(client, leased):
    key = _dispatched(client, leased)
    _err(client.post(op_url(key, "confirm"), json={"fencing_token": leased, "remote_id": "r" * 256}, headers=auth()),
         422, "validation_error")
    _err(client.post(op_url(key, "confirm"), json={"fencing_token": leased, "remote_id": {"a": 1}}, headers=auth()),
         422, "validation_error")
    r = client.post(op_url(key, "confirm"), json={"fencing_token": leased, "remote_id": "r" * 255}, headers=auth())
    assert r.status_code == 200


def test_limits_driver_data_error_is_422_invalid_value(app, client):
    """Whatever slips past the schemas, a driver's DataError is the caller's bad value, not our 500."""
    from peewee import DataError

    @app.get("/v1/_test_data_error")
    def _boom():
        raise DataError("value too long for type character varying(255)")

    _err(client.get("/v1/_test_data_error", headers=auth()), 422, "invalid_value")


# -- 2. non-finite numbers, strict JSON out --------------------------------------------------

@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e400", "-1e400"])
def test_limits_non_finite_numbers_are_refused(client, leased, literal):
    key = _dispatched(client, leased)
    for url, text in (
        (op_url(key, "confirm"), '{"fencing_token": %d, "remote_id": 1, "receipt": {"v": %s}}' % (leased, literal)),
        (op_url(key, "confirm"), '{"fencing_token": %d, "remote_id": 1, "cost": %s}' % (leased, literal)),
        ("/v1/operations/begin", '{"job_id": "j1", "action": "x", "fencing_token": %d, "payload": {"v": %s}}'
         % (leased, literal)),
        ("/v1/jobs/j1/checkpoints", '{"fencing_token": %d, "phase": "SOURCES_COLLECTED", "remote": {"v": %s}}'
         % (leased, literal)),
    ):
        _err(_raw(client, "POST", url, text), 422, "invalid_value")
    op = client.get(op_url(key), headers=auth())
    assert op.get_json()["operation"]["state"] == "SENT"


def test_limits_cost_that_would_overflow_is_refused(client, leased):
    from durable_ledger.store.db import db
    from durable_ledger.store.models import Job

    k1, k2, k3 = (_dispatched(client, leased, a) for a in ("a1", "a2", "a3"))
    # one confirm's cost is bounded; 1e308 twice would sum to Infinity
    _err(client.post(op_url(k1, "confirm"), json={"fencing_token": leased, "remote_id": 1, "cost": 1e308},
                     headers=auth()), 422, "validation_error")
    assert client.post(op_url(k1, "confirm"), json={"fencing_token": leased, "remote_id": 1, "cost": 9e11},
                       headers=auth()).status_code == 200
    assert client.get("/v1/jobs/j1", headers=auth()).get_json()["counters"]["cost"] == 9e11
    # and so is the job's running total: a confirm that would take it past the cap is refused
    with db.connection_context():
        Job.update(cost=1e15 - 1).where(Job.job_id == "j1").execute()
    e = _err(client.post(op_url(k2, "outcome"), json={"fencing_token": leased, "http_status": 201, "remote_id": 2,
                                                      "cost": 1e12}, headers=auth()), 422, "invalid_value")
    assert e["details"]["max_total"] == 1e15
    r = client.post("/v1/operations/batch", json={"confirm": [{"operation_key": k3, "fencing_token": leased,
                                                               "remote_id": 3, "cost": 1e12}]}, headers=auth())
    assert r.get_json()["confirm"][0]["error"]["code"] == "invalid_value"
    ops = client.get("/v1/jobs/j1/operations", headers=auth()).get_json()["operations"]
    assert [o["state"] for o in ops] == ["CONFIRMED", "SENT", "SENT"]
    text = client.get("/v1/jobs/j1/report", headers=auth()).get_data(as_text=True)
    assert "Infinity" not in text and "NaN" not in text


def test_limits_emitted_json_is_strict_even_for_old_rows(client, leased):
    """Rows written before the input checks existed (a NaN receipt) still read back as strict JSON."""
    from durable_ledger.store.db import db
    from durable_ledger.store.models import Operation

    key = _dispatched(client, leased)
    with db.connection_context():
        Operation.update(receipt={"v": float("nan"), "w": float("inf")}).where(Operation.operation_key == key).execute()
    r = client.get(op_url(key), headers=auth())
    assert r.status_code == 200
    json.loads(r.get_data(as_text=True), parse_constant=lambda c: pytest.fail(f"non-strict JSON: {c}"))
    assert r.get_json()["operation"]["receipt"] == {"v": None, "w": None}


# -- 3. addressable keys, no redirects to another key ------------------------------------------

@pytest.mark.parametrize("key", [".", "..", "/victim", "victim/", "a//b", "a/./b", "a/../b", "tab\tkey", "nl\nkey",
                                 "del\x7fkey", " "])
def test_limits_unaddressable_operation_keys_are_refused(client, leased, key):
    r = client.post("/v1/operations/begin", json=_begin_body(leased, operation_key=key), headers=auth())
    _err(r, 422, "validation_error")


@pytest.mark.parametrize("action", ["..", "/x", "a//b", "x/", "a\x01b"])
def test_limits_unaddressable_actions_are_refused(client, leased, action):
    _err(client.post("/v1/operations/begin", json=_begin_body(leased, action=action), headers=auth()), 422)


def test_limits_percent_encoded_slash_never_reaches_another_operation(client, leased):
    r = client.post("/v1/operations/begin", json=_begin_body(leased, operation_key="victim"), headers=auth())
    assert r.get_json()["decision"] == "dispatch"
    for url in ("/v1/operations/%2Fvictim/confirm", "/v1/operations//victim/confirm",
                "/v1/operations/%2F%2Fvictim/confirm", "/v1/operations/victim%2F/confirm"):
        r = client.post(url, json={"fencing_token": leased, "remote_id": 7}, headers=auth())
        assert r.status_code in (404, 422), (url, r.status_code, r.headers.get("Location"))
        assert "Location" not in r.headers
    assert client.get("/v1/operations/victim", headers=auth()).get_json()["operation"]["state"] == "SENT"
    assert client.get("/v1/jobs//j1", headers=auth()).status_code == 404


# -- 4. size limits ---------------------------------------------------------------------------

@pytest.fixture
def small_app(database, tmp_path, monkeypatch):
    monkeypatch.setenv("DURABLE_ARTIFACT_DIR", str(tmp_path / "artifacts"))
    cfg = Config(database_url=database, bootstrap_tokens=TOKENS, log_level="WARNING", max_body_bytes=64 * 1024,
                 max_receipt_bytes=2048, max_checkpoint_bytes=4096, max_artifact_bytes=10_000,
                 artifact_quota_bytes=25_000)
    application = create_app(cfg)
    application.testing = True
    return application


def test_limits_sizes_come_from_the_environment():
    cfg = Config.from_env({"DURABLE_MAX_BODY_BYTES": "100", "DURABLE_MAX_RECEIPT_BYTES": "10",
                           "DURABLE_MAX_CHECKPOINT_BYTES": "20", "DURABLE_MAX_ARTIFACT_BYTES": "30",
                           "DURABLE_ARTIFACT_QUOTA_BYTES": "40", "DURABLE_DATABASE_URL": "sqlite:///:memory:"})
    assert (cfg.max_body_bytes, cfg.max_receipt_bytes, cfg.max_checkpoint_bytes, cfg.max_artifact_bytes,
            cfg.artifact_quota_bytes) == (100, 10, 20, 30, 40)
    default = Config.from_env({"DURABLE_DATABASE_URL": "sqlite:///:memory:"})
    assert default.max_body_bytes == 2 * 1024 * 1024 and default.artifact_quota_bytes > default.max_artifact_bytes


def test_limits_body_receipt_and_checkpoint_sizes(small_app):
    client = small_app.test_client()
    client.put("/v1/jobs/j1", json={"pipeline": "article"}, headers=auth())
    token = client.post("/v1/jobs/j1/lease", json={"owner": "o"}, headers=auth()).get_json()["fencing_token"]
    big = "x" * (70 * 1024)
    e = _err(client.post("/v1/operations/begin", json=_begin_body(token, payload={"b": big}), headers=auth()),
             413, "payload_too_large")
    assert e["details"]["max_bytes"] == 64 * 1024
    key = _dispatched(client, token)
    e = _err(client.post(op_url(key, "confirm"), json={"fencing_token": token, "remote_id": 1,
                                                       "receipt": {"b": "x" * 3000}}, headers=auth()), 422)
    assert "receipt" in json.dumps(e["details"])
    _err(client.post(op_url(key, "fail"), json={"fencing_token": token, "error": {"b": "x" * 3000}},
                     headers=auth()), 422)
    e = _err(client.post("/v1/jobs/j1/checkpoints", json={"fencing_token": token, "phase": "SOURCES_COLLECTED",
                                                          "remote": {"b": "x" * 5000}}, headers=auth()), 422)
    assert client.get("/v1/jobs/j1", headers=auth()).get_json()["phase"] is None
    assert client.post(op_url(key, "confirm"), json={"fencing_token": token, "remote_id": 1,
                                                     "receipt": {"b": "x" * 1000}}, headers=auth()).status_code == 200


def test_limits_artifact_size_and_tenant_quota(small_app):
    client = small_app.test_client()
    e = _err(client.put("/v1/artifacts", data=b"a" * 10_001, headers=auth()), 413, "payload_too_large")
    assert e["details"]["max_bytes"] == 10_000
    # chunked upload without Content-Length: the limit holds while streaming, too
    r = client.put("/v1/artifacts", input_stream=io.BytesIO(b"b" * 20_000),
                   headers={**auth(), "Transfer-Encoding": "chunked"},
                   environ_overrides={"wsgi.input_terminated": True})  # as a server that reads chunked bodies sets it
    _err(r, 413, "payload_too_large")
    for i in range(2):
        assert client.put("/v1/artifacts", data=bytes([65 + i]) * 10_000, headers=auth()).status_code == 201
    # re-storing content the tenant already has costs nothing
    assert client.put("/v1/artifacts", data=b"A" * 10_000, headers=auth()).status_code == 200
    e = _err(client.put("/v1/artifacts", data=b"C" * 9_000, headers=auth()), 413, "artifact_quota_exceeded")
    assert e["details"]["quota_bytes"] == 25_000 and e["details"]["used_bytes"] == 20_000
    # the quota is per tenant
    assert client.put("/v1/artifacts", data=b"C" * 9_000, headers=auth("other-token")).status_code == 201
    # a JSON route still has the (smaller) body limit
    _err(client.post("/v1/operations/begin", data=b"{" + b" " * 70_000 + b"}",
                     headers={**auth(), "Content-Type": "application/json"}), 413, "payload_too_large")


def test_limits_keys_with_slashes_stay_addressable(client, leased):
    r = client.post("/v1/operations/begin", json=_begin_body(leased, operation_key="upload/hero"), headers=auth())
    assert r.get_json()["decision"] == "dispatch"
    assert client.get(op_url("upload/hero"), headers=auth()).status_code == 200
    assert client.get("/v1/operations/upload/hero", headers=auth()).status_code == 200
    r = client.post("/v1/operations/upload%2Fhero/confirm", json={"fencing_token": leased, "remote_id": 5},
                    headers=auth())
    assert r.get_json()["operation"]["state"] == "CONFIRMED"


def test_limits_405_says_which_methods_are_allowed(client):
    r = client.patch("/v1/operations/begin", json={}, headers=auth())
    e = _err(r, 405, "method_not_allowed")
    assert "POST" in r.headers["Allow"] and "POST" in e["details"]["allowed"]


def test_limits_review_page_forms_with_nul_are_refused(app, client, leased):
    key = _dispatched(client, leased)
    import re

    page = app.test_client()
    csrf = re.search(r'name="csrf" value="([^"]+)"',
                     page.get("/review", follow_redirects=True).get_data(as_text=True)).group(1)
    assert page.post("/review/login", data={"token": "editor-token", "csrf": csrf}).status_code == 302
    # sign-in starts a new session, and with it a new form token
    csrf = re.search(r'name="csrf" value="([^"]+)"',
                     page.get("/review", follow_redirects=True).get_data(as_text=True)).group(1)
    r = page.post(f"/review/item/{quote(key, safe='')}/resolve", data={"decision": "fail", "note": "a\x00b",
                                                                       "csrf": csrf, "expected_state": "SENT"})
    _err(r, 422, "invalid_value")
    assert client.get(op_url(key), headers=auth()).get_json()["operation"]["state"] == "SENT"
    r = page.post("/review/login", data={"token": "editor\x00", "csrf": csrf})
    _err(r, 422, "invalid_value")
