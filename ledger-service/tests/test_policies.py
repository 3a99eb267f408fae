"""Approvals, stop conditions, budgets, cancellation, resume and the report (through HTTP).

Each rule has the case that must be refused and the case that must pass.
"""

import time
from datetime import datetime, timedelta, timezone
from urllib.parse import quote

import pytest

from conftest import auth
from durable_ledger.kernel.digest import request_digest
from durable_ledger.store.models import Job

BODY = {"title": "T", "content": "final text"}
APPROVER, EDITOR = auth("approver-token"), auth("editor-token")


def expiry(seconds=3600):
    return (datetime.now(timezone.utc) + timedelta(seconds=seconds)).isoformat()


@pytest.fixture
def tok(client):
    client.put("/v1/jobs/a1", json={"pipeline": "article", "policy_hash": "p1"}, headers=auth())
    return client.post("/v1/jobs/a1/lease", json={"owner": "w1"}, headers=auth()).get_json()["fencing_token"]


def begin(client, token, action="publish", payload=BODY, target="wordpress:test:101", **kw):
    r = client.post("/v1/operations/begin", headers=auth(), json={
        "job_id": "a1", "action": action, "payload": payload, "fencing_token": token, "target": target, **kw})
    assert r.status_code == 200, r.get_json()
    return r.get_json()


def approve(client, version=1, action="publish", payload=BODY, target="wordpress:test:101", expires=None):
    r = client.post("/v1/approvals", headers=APPROVER, json={
        "job_id": "a1", "task_version": version, "action": action, "content_digest": request_digest(payload),
        "target": target, "expires_at": expires or expiry()})
    assert r.status_code == 201, r.get_json()
    return r.get_json()


def test_publish_in_article_pipeline_always_needs_approval(client, tok):
    out = begin(client, tok)
    assert (out["decision"], out["reason"]) == ("halt", "approval_required")
    approve(client)
    assert begin(client, tok)["decision"] == "dispatch"


def test_approval_for_v1_is_not_valid_for_v2(client, tok):
    approve(client, version=1)
    client.post("/v1/jobs/a1/versions", json={"fencing_token": tok}, headers=auth())
    assert begin(client, tok)["reason"] == "approval_required"
    approve(client, version=2)
    assert begin(client, tok)["decision"] == "dispatch"


def test_changed_body_after_approval_is_refused(client, tok):
    approve(client, payload=BODY)
    out = begin(client, tok, payload={**BODY, "content": "edited after approval"}, operation_key="k-edited")
    assert out["reason"] == "approval_required"


def test_other_target_or_action_is_refused(client, tok):
    approve(client)
    assert begin(client, tok, target="wordpress:production:101")["reason"] == "approval_required"
    assert begin(client, tok, action="publish_social", requires_approval=True)["reason"] == "approval_required"


def test_expired_approval_is_refused(client, tok):
    a = approve(client, expires=expiry(1))
    time.sleep(1.2)
    assert begin(client, tok)["reason"] == "approval_required"
    assert a["live"] is True


def test_revoked_approval_is_refused_and_audited(client, tok):
    a = approve(client)
    r = client.delete(f"/v1/approvals/{a['id']}", headers=APPROVER)
    assert r.status_code == 200 and r.get_json()["revoked_at"]
    assert begin(client, tok)["reason"] == "approval_required"
    actions = [x["approved_by"] for x in client.get("/v1/jobs/a1/report", headers=auth()).get_json()["approvals"]]
    assert actions == ["approver:bootstrap-acme-approver"]


@pytest.mark.parametrize("token", ["runner-token", "editor-token"])
def test_only_approvers_approve(client, tok, token):
    r = client.post("/v1/approvals", headers=auth(token), json={
        "job_id": "a1", "task_version": 1, "action": "publish", "content_digest": request_digest(BODY),
        "target": "t", "expires_at": expiry()})
    assert r.status_code == 403 and r.get_json()["error"]["code"] == "forbidden"


def test_runner_cannot_set_approval_status_through_checkpoint(client, tok):
    r = client.post("/v1/jobs/a1/checkpoints", headers=auth(),
                    json={"fencing_token": tok, "phase": "SOURCES_COLLECTED", "approval_status": "approved"})
    assert r.status_code == 403


def test_remote_403_halts_until_reauthorized(client, tok):
    key = begin(client, tok, action="create_draft")["operation"]["operation_key"]
    client.post(f"/v1/operations/{quote(key, safe='')}/outcome", headers=auth(),
                json={"fencing_token": tok, "http_status": 403})
    out = begin(client, tok, action="set_seo")
    assert (out["decision"], out["reason"]) == ("halt", "authorization_revoked")
    packet = client.post("/v1/jobs/a1/resume", headers=auth(), json={"owner": "w2", "takeover": True}).get_json()
    assert packet["halted"] and packet["halt_reason"] == "authorization_revoked"
    new_tok = packet["fencing_token"]
    assert begin(client, new_tok, action="set_seo")["decision"] == "halt"
    assert client.post("/v1/jobs/a1/reauthorize", headers=auth(), json={}).status_code == 403
    assert client.post("/v1/jobs/a1/reauthorize", headers=APPROVER, json={"note": "new app password"}).status_code == 200
    assert begin(client, new_tok, action="set_seo")["decision"] == "dispatch"


def test_cancelled_job_never_dispatches_and_resume_refuses(client, tok):
    key = begin(client, tok, action="create_draft")["operation"]["operation_key"]
    r = client.post("/v1/jobs/a1/cancel", headers=auth(), json={"reason": "user asked"}).get_json()
    assert r["status"] == "cancelled" and [o["operation_key"] for o in r["in_flight_left_to_reconcile"]] == [key]
    out = begin(client, tok, action="set_seo")
    assert (out["decision"], out["reason"]) == ("halt", "cancelled")
    r = client.post("/v1/jobs/a1/resume", headers=auth(), json={"owner": "w2", "takeover": True})
    assert r.status_code == 409 and r.get_json()["error"]["code"] == "invalid_transition"
    assert client.post("/v1/jobs/a1/reauthorize", headers=APPROVER, json={}).status_code == 409
    assert client.get("/v1/jobs/a1", headers=auth()).get_json()["status"] == "cancelled"


@pytest.mark.parametrize("budget, setup", [
    ("max_tool_calls", lambda c, t: begin(c, t, action="a1") and begin(c, t, action="a2")),
    ("max_cost", lambda c, t: c.post(
        f"/v1/operations/{quote(begin(c, t, action='gen')['operation']['operation_key'], safe='')}/confirm",
        headers=auth(), json={"fencing_token": t, "remote_id": "r", "cost": 2.5})),
    ("deadline_s", lambda c, t: Job.update(created_at=Job.created_at - 100).execute()),
])
def test_each_budget_halts_when_exhausted(client, budget, setup):
    limits = {"max_tool_calls": 2, "max_cost": 2.0, "deadline_s": 50}
    client.put("/v1/jobs/a1", json={"budgets": {budget: limits[budget]}}, headers=auth())
    t = client.post("/v1/jobs/a1/lease", json={"owner": "w1"}, headers=auth()).get_json()["fencing_token"]
    assert begin(client, t, action="before")["decision"] == "dispatch"
    setup(client, t)
    out = begin(client, t, action="after")
    assert (out["decision"], out["reason"], out["budget"]) == ("halt", "budget_exhausted", budget)


def test_resume_attempts_budget(client):
    client.put("/v1/jobs/a1", json={"budgets": {"max_resume_attempts": 2}}, headers=auth())
    packets = [client.post("/v1/jobs/a1/resume", headers=auth(), json={"owner": f"w{i}", "takeover": True}).get_json()
               for i in range(3)]
    assert [p["halted"] for p in packets] == [False, False, True]
    assert packets[-1]["budget"] == "max_resume_attempts"


def test_backoff_after_repeated_failures(client, app, tok):
    app.config["DURABLE"].backoff_base_s = 30
    key = quote(begin(client, tok, action="create_draft")["operation"]["operation_key"], safe="")
    client.post(f"/v1/operations/{key}/fail", headers=auth(), json={"fencing_token": tok})
    assert begin(client, tok, action="create_draft")["decision"] == "dispatch"  # first retry is immediate
    client.post(f"/v1/operations/{key}/fail", headers=auth(), json={"fencing_token": tok})
    out = begin(client, tok, action="create_draft")
    assert (out["decision"], out["reason"]) == ("halt", "backoff") and 0 < out["retry_after"] <= 30


def _walk_to_images(client, tok, sha):
    for phase, arts in [("SOURCES_COLLECTED", [{"role": "sources", "uri": "file:///s", "sha256": "1" * 64}]),
                        ("BODY_GENERATED", [{"role": "body", "uri": "file:///b", "sha256": sha}]),
                        ("QA_PASSED", []), ("IMAGES_READY", [])]:
        r = client.post("/v1/jobs/a1/checkpoints", headers=auth(), json={
            "fencing_token": tok, "phase": phase, "artifacts": arts, "next_allowed_actions": ["upload_media"]})
        assert r.status_code == 201, r.get_json()


def test_resume_verifies_artifacts_and_goes_back_not_forward(client, tok):
    _walk_to_images(client, tok, "2" * 64)
    client.post("/v1/jobs/a1/checkpoints", headers=auth(), json={
        "fencing_token": tok, "phase": "IMAGES_READY",
        "artifacts": [{"role": "body", "uri": "file:///b", "sha256": "2" * 64}]})
    ok = client.post("/v1/jobs/a1/resume", headers=auth(), json={
        "owner": "w2", "takeover": True, "artifacts": [{"role": "body", "sha256": "2" * 64}]}).get_json()
    assert ok["phase"] == "IMAGES_READY" and ok["artifacts"][0]["verified"] is True
    bad = client.post("/v1/jobs/a1/resume", headers=auth(), json={
        "owner": "w3", "takeover": True, "artifacts": [{"role": "body", "sha256": "3" * 64}]}).get_json()
    assert bad["artifacts"][0]["status"] == "digest_mismatch"
    assert (bad["phase"], bad["rebuild_phase"], bad["rewound_from"]) == ("SOURCES_COLLECTED", "BODY_GENERATED", "IMAGES_READY")
    assert bad["next_allowed_actions"] == ["rebuild:BODY_GENERATED"]
    assert client.get("/v1/jobs/a1", headers=auth()).get_json()["phase"] == "SOURCES_COLLECTED"


def test_policy_change_halts_until_reapproved(client, tok):
    packet = client.post("/v1/jobs/a1/resume", headers=auth(),
                         json={"owner": "w2", "takeover": True, "policy_hash": "p2"}).get_json()
    assert packet["halt_reason"] == "policy_changed" and packet["approvals"] == []
    assert begin(client, packet["fencing_token"], action="create_draft")["reason"] == "policy_changed"
    client.post("/v1/jobs/a1/reauthorize", headers=APPROVER, json={"policy_hash": "p2"})
    assert begin(client, packet["fencing_token"], action="create_draft")["decision"] == "dispatch"


def test_recovery_packet_summary_and_report(client, tok):
    key = quote(begin(client, tok, action="create_draft")["operation"]["operation_key"], safe="")
    client.post(f"/v1/operations/{key}/confirm", headers=auth(), json={"fencing_token": tok, "remote_id": 101})
    k2 = quote(begin(client, tok, action="set_seo")["operation"]["operation_key"], safe="")
    client.post(f"/v1/operations/{k2}/unknown", headers=auth(), json={"fencing_token": tok})
    begin(client, tok)  # publish without approval: prepared, pending a human
    packet = client.post("/v1/jobs/a1/resume", headers=auth(), json={"owner": "w2", "takeover": True}).get_json()
    assert "create_draft confirmed (remote id 101): do not repeat it" in packet["summary"]
    assert "set_seo is UNKNOWN" in packet["summary"] and "do not publish" in packet["summary"]
    assert [o["action"] for o in packet["needs_reconcile"]] == ["set_seo"]
    rep = client.get("/v1/jobs/a1/report", headers=auth()).get_json()
    assert rep["counts"] == {"completed": 1, "confirmed_failed": 0, "unknown": 1, "pending_human": 1, "abandoned": 0}
    assert rep["budgets"]["max_tool_calls"]["used"] == 2
    acc = client.get("/v1/metrics/acceptance", headers=auth()).get_json()
    assert acc["unknown_operations_left"] == 1 and acc["resumes_per_job"] == {"a1": 1}
    assert acc["refusals_by_code"]["approval_required"] == 1 and acc["operations_confirmed_twice"] == 0


def test_stale_token_refusals_are_counted(client, tok):
    client.post("/v1/jobs/a1/lease", json={"owner": "w2", "takeover": True}, headers=auth())
    r = client.post("/v1/operations/begin", headers=auth(), json={
        "job_id": "a1", "action": "x", "payload": {}, "fencing_token": tok})
    assert r.status_code == 409
    acc = client.get("/v1/metrics/acceptance", headers=auth()).get_json()
    assert acc["refusals_by_code"] == {"stale_fencing_token": 1} and acc["unauthorized_side_effects_refused"] == 1
    assert 'code="stale_fencing_token"} 1' in client.get("/metrics").get_data(as_text=True)


def test_prune_keeps_non_terminal(client, tok):
    from durable_ledger.jobs.retention import prune
    from durable_ledger.store.models import Operation

    k = quote(begin(client, tok, action="done")["operation"]["operation_key"], safe="")
    client.post(f"/v1/operations/{k}/confirm", headers=auth(), json={"fencing_token": tok, "remote_id": 1})
    begin(client, tok, action="inflight")
    Operation.update(updated_at=Operation.updated_at - 40 * 86400).execute()
    assert prune()["operations"] == 1
    assert [o.action for o in Operation.select()] == ["inflight"]
