"""Required actions answered from receipts, and the guarded follow-up."""

import json
from urllib.parse import quote

import pytest
from agents_standin import (bound_job, function_call_action,
                            turn_body)
from conftest import auth

from durable_ledger.agents import actions
from durable_ledger.agents.actions import FunctionResult, register_function


@pytest.fixture
def standin(standin):
    standin.default_tenant = "acme"  # sessions are bound only for the tenant in their metadata
    return standin


@pytest.fixture
def drafts(monkeypatch):
    """A counted side effect: every execution is one more draft in the remote system."""
    created = []

    def execute(args):
        created.append(args)
        return FunctionResult(remote_id=f"wp-{100 + len(created)}", output={"post_id": 100 + len(created)})

    monkeypatch.setattr(actions, "HANDLERS", {})
    register_function("create_draft", action=lambda a: f"create_draft:{a['slug']}", execute=execute,
                      target="wordpress:test")
    return created


def sync(client, token, **extra):
    r = client.post("/v1/jobs/j1/session/sync", json={"answer_actions": True, "fencing_token": token, **extra},
                    headers=auth())
    assert r.status_code == 200, r.get_json()
    return r.get_json()


def test_function_call_answered_once_and_redelivered_from_receipt(client, standin, drafts):
    standin.add_session("sess_1", status="requires_action",
                        required_actions=[function_call_action("call_1", "create_draft", {"slug": "a"})])
    token = bound_job(client, auth())
    standin.fail_event_posts = 1  # the answer's delivery fails
    first = sync(client, token)["actions"]
    assert first[0]["status"] == "delivery_failed" and first[0]["executed"] is True
    assert len(drafts) == 1
    second = sync(client, token)["actions"]
    assert second[0]["decision"] == "reuse_receipt" and second[0]["status"] == "delivered"
    assert second[0]["executed"] is False and len(drafts) == 1
    results = standin.accepted_events("sess_1", "agent.session.input.tool_result")
    assert [(e["call_id"], json.loads(e["output"])) for e in results] == [("call_1", {"post_id": 101})]
    op = client.get("/v1/operations/" + quote("acme:j1:v1:create_draft:a", safe=""), headers=auth()).get_json()
    assert op["operation"]["state"] == "CONFIRMED" and op["operation"]["remote_id"] == "wp-101"

    # The model retries the same business action in a new turn: new call_id, same receipt.
    standin.update_session("sess_1", status="requires_action", required_actions=[
        function_call_action("call_2", "create_draft", {"slug": "a"}, turn_id="turn_2")])
    standin.lose_event_responses = 1  # accepted remotely, but our client never hears it
    third = sync(client, token)["actions"]
    assert third[0]["status"] == "delivery_failed" and len(drafts) == 1
    standin.update_session("sess_1", status="requires_action", required_actions=[
        function_call_action("call_2", "create_draft", {"slug": "a"}, turn_id="turn_2")])
    fourth = sync(client, token)["actions"]
    assert fourth[0]["status"] == "delivered" and len(drafts) == 1
    results = standin.accepted_events("sess_1", "agent.session.input.tool_result")
    assert [e["call_id"] for e in results] == ["call_1", "call_2"]  # the lost response did not double it


def test_approvals_never_auto_approved_and_environment_is_state(client, standin, drafts):
    mcp = {"type": "mcp_approval_request", "request_id": "req_1", "turn_id": "turn_1",
           "request": {"type": "mcp_tool_call", "server_label": "wp", "message": "Publish the post?",
                       "name": "publish", "arguments": {"id": 7}}}
    env = {"type": "environment_connection", "environment_id": "env_9"}
    standin.add_session("sess_1", status="requires_action", required_actions=[mcp, env])
    token = bound_job(client, auth())
    out = sync(client, token)
    approval, environment = out["actions"]
    assert approval["status"] == "approval_required" and approval["decision"] == "halt"
    assert environment["status"] == "environment_state"
    assert out["environment"]["state"] == "connection_required"
    assert out["environment"]["reconnect_environment_id"] == "env_9"
    assert standin.accepted == [] and drafts == []  # nothing answered, nothing executed
    ops = client.get("/v1/jobs/j1/operations", headers=auth()).get_json()["operations"]
    assert [(o["action"], o["state"], o["requires_approval"]) for o in ops] == [
        ("mcp_approval_request:req_1", "PREPARED", True)]


def _follow(client, token, key, message="Continue with the SEO step."):
    return client.post("/v1/jobs/j1/session/follow-up", json={"message": message, "fencing_token": token},
                       headers={**auth(), "Idempotency-Key": key})


def test_follow_up_refused_while_unknown_then_sent_once(client, standin):
    standin.add_session("sess_1")
    token = bound_job(client, auth())
    begin = client.post("/v1/operations/begin", json={"job_id": "j1", "action": "create_draft",
                                                       "payload": {"t": 1}, "fencing_token": token}, headers=auth())
    key = quote(begin.get_json()["operation"]["operation_key"], safe="")
    client.post(f"/v1/operations/{key}/unknown", json={"fencing_token": token, "error": {"kind": "timeout"}},
                headers=auth())
    r = _follow(client, token, "fu-1")
    assert r.status_code == 409
    err = r.get_json()["error"]
    assert err["code"] == "follow_up_refused"
    assert {"reason": "operation_unresolved", "operation_key": "acme:j1:v1:create_draft", "state": "UNKNOWN"} \
        in err["details"]["reasons"]
    assert standin.accepted == []

    # Reconciled: the remote had it, the operation is confirmed.
    r = client.post(f"/v1/operations/{key}/confirm", json={"fencing_token": token, "remote_id": "wp-7"}, headers=auth())
    assert r.status_code == 200
    standin.lose_event_responses = 1  # accepted remotely, response lost
    assert _follow(client, token, "fu-1").status_code == 502
    r = _follow(client, token, "fu-1")
    assert r.status_code == 201 and r.get_json()["sent_now"] is True
    r = _follow(client, token, "fu-1")
    assert r.status_code == 200 and r.get_json()["sent_now"] is False
    messages = standin.accepted_events("sess_1", "agent.session.input.message")
    assert len(messages) == 1
    text = messages[0]["input"][0]["content"][0]["text"]
    assert "done: create_draft (remote id wp-7)" in text and text.endswith("Continue with the SEO step.")
    assert standin.requests["POST events"] == 2  # the third call did not even reach the API


@pytest.mark.parametrize("state", ["turn", "halted"])
def test_follow_up_refused_while_turn_open_or_job_halted(client, standin, state):
    standin.add_session("sess_1", turns=[turn_body("sess_1", "turn_1", "in_progress" if state == "turn" else "completed")])
    token = bound_job(client, auth())
    if state == "halted":
        begin = client.post("/v1/operations/begin", json={"job_id": "j1", "action": "x", "payload": {},
                                                           "fencing_token": token}, headers=auth()).get_json()
        client.post("/v1/operations/" + quote(begin["operation"]["operation_key"], safe="") + "/outcome",
                    json={"fencing_token": token, "http_status": 401}, headers=auth())
    r = _follow(client, token, "fu-2")
    assert r.status_code == 409
    reasons = [x["reason"] for x in r.get_json()["error"]["details"]["reasons"]]
    assert ("turn_open" if state == "turn" else "job_halted") in reasons
    assert standin.accepted == []


def test_follow_up_refused_while_session_is_at_its_spending_limit(client, standin):
    standin.add_session("sess_1", status="budget_reached")
    token = bound_job(client, auth())
    r = _follow(client, token, "fu-3")
    assert r.status_code == 409
    assert [x["reason"] for x in r.get_json()["error"]["details"]["reasons"]] == ["session_budget_reached"]
    assert standin.accepted == []
