"""Reconciliation decisions and the review queue, with scripted reconcilers registered in the
registry (the real WordPress reconciler runs against a real WordPress in tests/reconcile)."""

from urllib.parse import quote

import pytest

from conftest import auth
from durable_ledger.reconciliation import registry
from durable_ledger.reconciliation.verdicts import Absent, Found, ReconcilerError, Undecidable

EDITOR = auth("editor-token")


class Scripted:
    """Answers what the test says; counts lookups."""

    def __init__(self, verdict=None, error=None, exists=True):
        self.verdict, self.error, self.exists, self.calls = verdict, error, exists, 0

    def lookup(self, op):
        self.calls += 1
        if self.error:
            raise ReconcilerError(self.error)
        return self.verdict

    def verify(self, op, remote_id):
        return self.exists


@pytest.fixture
def scripted():
    rec = Scripted()
    registry.register("test.create", rec)
    yield rec
    registry.unregister("test.create")


@pytest.fixture
def tok(client):
    client.put("/v1/jobs/r1", json={}, headers=auth())
    return client.post("/v1/jobs/r1/lease", json={"owner": "w"}, headers=auth()).get_json()["fencing_token"]


def begin(client, tok, action="create", payload=None):
    r = client.post("/v1/operations/begin", headers=auth(), json={
        "job_id": "r1", "action": action, "target": "test:site", "payload": payload or {"title": "Post A"},
        "fencing_token": tok})
    assert r.status_code == 200, r.get_json()
    return r.get_json()


def unknown(client, tok, key):
    client.post(f"/v1/operations/{quote(key, safe='')}/unknown", headers=auth(), json={"fencing_token": tok})


def test_found_confirms_and_reuses_receipt(client, tok, scripted):
    key = begin(client, tok)["operation"]["operation_key"]
    unknown(client, tok, key)
    scripted.verdict = Found("101", {"object_type": "post"}, {"lookup": "operation_key"})
    out = begin(client, tok)
    assert out["decision"] == "reuse_receipt" and out["receipt"]["remote_id"] == "101"
    assert out["reconciliation"]["verdict"] == "found"
    assert begin(client, tok)["decision"] == "reuse_receipt" and scripted.calls == 1


def test_definitive_absence_dispatches_next_attempt(client, tok, scripted):
    key = begin(client, tok)["operation"]["operation_key"]
    scripted.verdict = Absent(True, {"detail": "no object"})
    out = begin(client, tok)  # SENT (caller crashed before the request left) -> reconcile -> dispatch
    assert (out["decision"], out["operation"]["attempt"], out["operation"]["state"]) == ("dispatch", 2, "SENT")
    events = client.get(f"/v1/operations/{quote(key, safe='')}", headers=auth()).get_json()["events"]
    assert [e["to_state"] for e in events] == ["SENT", "FAILED", "SENT"]


def test_absence_within_attempt_budget_only(client, app, tok, scripted):
    client.put("/v1/jobs/r2", json={"budgets": {"max_attempts": 1}}, headers=auth())
    t = client.post("/v1/jobs/r2/lease", json={"owner": "w"}, headers=auth()).get_json()["fencing_token"]
    body = {"job_id": "r2", "action": "create", "target": "test:x", "payload": {}, "fencing_token": t}
    client.post("/v1/operations/begin", headers=auth(), json=body)
    scripted.verdict = Absent(True)
    out = client.post("/v1/operations/begin", headers=auth(), json=body).get_json()
    assert (out["decision"], out["reason"]) == ("halt", "retry_budget_exhausted")


@pytest.mark.parametrize("verdict", [Undecidable({"lookup": "title"}, [{"id": 7, "title": "Post A"}]),
                                     Absent(False, {"detail": "no plugin"})])
def test_undecidable_goes_to_review_and_nothing_dispatches(client, tok, scripted, verdict):
    key = begin(client, tok)["operation"]["operation_key"]
    unknown(client, tok, key)
    scripted.verdict = verdict
    out = begin(client, tok)
    assert (out["decision"], out["operation"]["state"]) == ("needs_review", "NEEDS_REVIEW")
    assert begin(client, tok)["decision"] == "needs_review" and scripted.calls == 1
    queue = client.get("/v1/reviews", headers=EDITOR).get_json()["reviews"]
    assert [q["operation_key"] for q in queue] == [key]
    assert queue[0]["candidates"] == list(getattr(verdict, "candidates", []))
    assert queue[0]["request_summary"] == {"title": "Post A"} and queue[0]["reconcile_attempts"] == 1


def test_reconciler_error_leaves_state_and_records_it(client, tok, scripted):
    key = begin(client, tok)["operation"]["operation_key"]
    unknown(client, tok, key)
    scripted.error = "publishing proxy unreachable: ConnectionError"
    out = begin(client, tok)
    assert (out["decision"], out["reason"], out["operation"]["state"]) == ("reconcile", "reconcile_failed", "UNKNOWN")
    item = client.get(f"/v1/reviews/{quote(key, safe='')}", headers=EDITOR).get_json()
    assert item["evidence"]["error"].startswith("publishing proxy unreachable")
    assert item["state"] == "UNKNOWN" and item["reconcile_attempts"] == 1


def test_one_reconciler_run_at_a_time(client, tok, scripted):
    from durable_ledger.store.models import Operation

    key = begin(client, tok)["operation"]["operation_key"]
    unknown(client, tok, key)
    Operation.update(reconciling_until=Operation.updated_at + 3600).execute()  # another run holds the claim
    scripted.verdict = Found("1")
    out = begin(client, tok)
    assert (out["decision"], out["reason"]) == ("reconcile", "reconcile_in_progress") and scripted.calls == 0


def test_no_reconciler_gate_leaves_it_explicit_reconcile_escalates(client, tok):
    key = begin(client, tok, action="notify")["operation"]["operation_key"]
    out = begin(client, tok, action="notify")
    assert (out["decision"], out["operation"]["state"]) == ("reconcile", "SENT")
    r = client.post(f"/v1/operations/{quote(key, safe='')}/reconcile", headers=auth()).get_json()
    assert (r["outcome"], r["operation"]["state"]) == ("no_reconciler", "NEEDS_REVIEW")


def test_editor_resolves_confirm_fail_abandon_with_audit(client, tok, scripted):
    scripted.verdict = Undecidable({}, [{"id": 7}])
    keys = []
    for action in ("create:a", "create:b", "create:c"):
        k = begin(client, tok, action=action)["operation"]["operation_key"]
        begin(client, tok, action=action)
        keys.append(quote(k, safe=""))
    r = client.post(f"/v1/reviews/{keys[0]}/resolve", headers=EDITOR, json={"decision": "confirm", "remote_id": 7,
                                                                           "note": "same post"})
    assert r.status_code == 200 and r.get_json()["operation"]["state"] == "CONFIRMED"
    assert client.post(f"/v1/reviews/{keys[1]}/resolve", headers=EDITOR,
                       json={"decision": "fail"}).get_json()["operation"]["state"] == "FAILED"
    assert client.post(f"/v1/reviews/{keys[2]}/resolve", headers=EDITOR,
                       json={"decision": "abandon"}).get_json()["operation"]["state"] == "ABANDONED"
    assert client.get("/v1/reviews", headers=EDITOR).get_json()["reviews"] == []
    assert begin(client, tok, action="create:a")["decision"] == "reuse_receipt"
    assert begin(client, tok, action="create:b")["decision"] == "dispatch"  # retry allowed, no backoff
    assert begin(client, tok, action="create:c")["reason"] == "abandoned"
    from durable_ledger.store.models import AuditLog

    resolved = [a for a in AuditLog.select().order_by(AuditLog.id) if a.action == "review_resolved"]
    assert [(a.actor, a.detail["decision"]) for a in resolved] == [
        ("editor:bootstrap-acme-editor", "confirm"), ("editor:bootstrap-acme-editor", "fail"),
        ("editor:bootstrap-acme-editor", "abandon")]


def test_editor_confirm_is_reverified(client, tok, scripted):
    scripted.verdict, scripted.exists = Undecidable({}), False
    k = quote(begin(client, tok)["operation"]["operation_key"], safe="")
    begin(client, tok)
    r = client.post(f"/v1/reviews/{k}/resolve", headers=EDITOR, json={"decision": "confirm", "remote_id": 999})
    assert r.status_code == 422 and r.get_json()["error"]["code"] == "validation_error"
    assert client.post(f"/v1/reviews/{k}/resolve", headers=EDITOR, json={"decision": "confirm"}).status_code == 422


def test_runner_cannot_use_review_queue(client, tok):
    assert client.get("/v1/reviews", headers=auth()).status_code == 403
    assert client.post("/v1/reviews/x/resolve", headers=auth(), json={"decision": "fail"}).status_code == 403


def test_sweeper_reconciles_stuck_and_leaves_fresh(client, tok, scripted):
    from durable_ledger.reconciliation.sweeper import sweep
    from durable_ledger.store.models import Operation

    old = begin(client, tok, action="create:old")["operation"]["operation_key"]
    begin(client, tok, action="create:fresh")
    Operation.update(updated_at=Operation.updated_at - 1000).where(Operation.operation_key == old).execute()
    scripted.verdict = Found("55")
    tally = sweep(sent_older_than_s=300, job_idle_s=3600, rate_per_s=0)
    assert (tally["examined"], tally["confirmed"]) == (1, 1)
    states = {o.action: o.state for o in Operation.select()}
    assert states == {"create:old": "CONFIRMED", "create:fresh": "SENT"}
