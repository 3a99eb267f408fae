"""Webhook inbox: verified, stored once, processed by the worker exactly once."""

import json
import time

import pytest
from agents_standin import (WEBHOOK_SECRET, bound_job, function_call_action, sign_webhook)
from conftest import auth

from durable_ledger.agents import actions
from durable_ledger.agents.actions import FunctionResult, register_function
from durable_ledger.agents.openai_client import get_client
from durable_ledger.store.agent_models import SessionBinding, WebhookInbox
from durable_ledger.agents.worker import poll_stale, process_inbox
from durable_ledger.store.db import db


@pytest.fixture
def standin(standin):
    standin.default_tenant = "acme"  # sessions are bound only for the tenant in their metadata
    return standin


@pytest.fixture
def drafts(monkeypatch):
    created = []
    monkeypatch.setattr(actions, "HANDLERS", {})
    register_function("create_draft", action="create_draft",
                      execute=lambda a: created.append(a) or FunctionResult(f"wp-{len(created)}", "ok"))
    return created


def _event(webhook_id="evt_1", session_id="sess_1"):
    return json.dumps({"id": webhook_id, "object": "event", "created_at": int(time.time()),
                       "type": "agent.session.action_required",
                       "data": {"id": session_id, "required_action": {"type": "function_call"}}})


def _inbox_count():
    with db.connection_context():
        return WebhookInbox.select().count()


def test_webhook_bad_or_old_signature_refused_nothing_stored(client, standin):
    standin.add_session("sess_1")
    bound_job(client, auth(), lease=False)
    body = _event()
    bad = sign_webhook("whsec_" + "A" * 40, body, "evt_1")
    r = client.post("/v1/webhooks/openai", data=body, headers=bad)
    assert r.status_code == 400 and r.get_json()["error"]["code"] == "invalid_webhook_signature"
    old = sign_webhook(WEBHOOK_SECRET, body, "evt_1", timestamp=int(time.time()) - 3600)
    assert client.post("/v1/webhooks/openai", data=body, headers=old).status_code == 400
    r = client.post("/v1/webhooks/openai", data=body, headers={"content-type": "application/json"})
    assert r.status_code == 400
    tampered = sign_webhook(WEBHOOK_SECRET, body, "evt_1")
    assert client.post("/v1/webhooks/openai", data=body.replace("sess_1", "sess_2"), headers=tampered).status_code == 400
    assert _inbox_count() == 0


def test_webhook_duplicate_ignored_and_worker_processes_once(client, standin, drafts):
    standin.add_session("sess_1", status="requires_action",
                        required_actions=[function_call_action("call_1", "create_draft", {"title": "T"})])
    bound_job(client, auth(), lease=False)
    body = _event()
    r = client.post("/v1/webhooks/openai", data=body, headers=sign_webhook(WEBHOOK_SECRET, body, "evt_1"))
    assert r.status_code == 200 and r.get_json()["status"] == "stored"
    r = client.post("/v1/webhooks/openai", data=body, headers=sign_webhook(WEBHOOK_SECRET, body, "evt_1"))
    assert r.status_code == 200 and r.get_json()["status"] == "duplicate"
    assert _inbox_count() == 1
    other = _event("evt_2", "sess_unknown")
    r = client.post("/v1/webhooks/openai", data=other, headers=sign_webhook(WEBHOOK_SECRET, other, "evt_2"))
    assert r.status_code == 200 and r.get_json()["status"] == "ignored"
    assert _inbox_count() == 1

    with db.connection_context():
        assert process_inbox(get_client(), owner="worker-a") == 1
        assert process_inbox(get_client(), owner="worker-b") == 0
        row = WebhookInbox.get()
        assert row.state == "done" and row.attempts == 1
        assert row.result["actions"][0]["status"] == "delivered"
    assert len(drafts) == 1
    assert [e["call_id"] for e in standin.accepted_events("sess_1", "agent.session.input.tool_result")] == ["call_1"]
    assert standin.requests["GET session"] >= 2  # the worker re-read the session, not the payload


def test_worker_skips_a_job_leased_by_someone_else(client, standin, drafts):
    standin.add_session("sess_1", status="requires_action",
                        required_actions=[function_call_action("call_1", "create_draft", {"title": "T"})])
    bound_job(client, auth())  # exec-1 holds a live lease
    body = _event()
    client.post("/v1/webhooks/openai", data=body, headers=sign_webhook(WEBHOOK_SECRET, body, "evt_1"))
    with db.connection_context():
        assert process_inbox(get_client(), owner="worker-a") == 0
        assert WebhookInbox.get().state == "pending"
    assert drafts == []


def test_polling_fallback_syncs_quiet_sessions(client, standin, drafts):
    standin.add_session("sess_1")
    bound_job(client, auth(), lease=False)
    with db.connection_context():
        assert poll_stale(get_client(), owner="poller", poll_interval_s=3600) == 1  # never synced
        assert SessionBinding.get().last_synced_at is not None
        assert poll_stale(get_client(), owner="poller", poll_interval_s=3600) == 0  # fresh now
