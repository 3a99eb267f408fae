"""An attempt belongs to the n8n execution that began it (reconciliation/attempts.py; issue 22, 10 and 11).

Every case counts what the ledger stored: the operation's state, its events (SENT, CONFIRMED,
the receipts kept as evidence) and the calls a scripted reconciler received. On both backends.
"""

from urllib.parse import quote

import pytest

from conftest import auth
from durable_ledger.reconciliation import registry
from durable_ledger.store.db import db
from durable_ledger.store.models import AuditLog
from durable_ledger.reconciliation.verdicts import Absent

EDITOR = auth("editor-token")


def n8n(execution_id, token="runner-token"):
    return {**auth(token), "X-N8N-Execution-Id": str(execution_id), "X-N8N-Workflow-Id": "wfOrders"}


class Scripted:
    """A reconciler whose lookup finds nothing and whose verify says ``exists``; counts calls."""

    def __init__(self, exists=True):
        self.exists, self.lookups, self.verified = exists, 0, []

    def lookup(self, op):
        self.lookups += 1
        return Absent(True, {"lookup": "operation_key"})

    def verify(self, op, remote_id):
        self.verified.append(remote_id)
        return self.exists


@pytest.fixture
def reconciler():
    """Registers a scripted reconciler for the orders when called (once the test wants one)."""
    made = []

    def register(exists=True):
        made.append(Scripted(exists))
        registry.register("test.order", made[-1])
        return made[-1]

    yield register
    registry.unregister("test.order")


def lease(client, job="a1", owner="w", takeover=False, headers=None):
    client.put(f"/v1/jobs/{job}", json={}, headers=auth())
    body = {"owner": owner, **({"takeover": True} if takeover else {})}
    return client.post(f"/v1/jobs/{job}/lease", json=body, headers=headers or auth()).get_json()["fencing_token"]


def begin(client, token, headers, job="a1"):
    r = client.post("/v1/operations/begin", headers=headers, json={
        "job_id": job, "action": "order", "target": "test:shop", "payload": {"order": 7}, "fencing_token": token})
    assert r.status_code == 200, r.get_json()
    return r.get_json()


def confirm(client, key, token, remote_id, headers):
    return client.post(f"/v1/operations/{quote(key, safe='')}/confirm", headers=headers,
                       json={"fencing_token": token, "remote_id": remote_id, "receipt": {"order_id": remote_id}})


def events(client, key):
    return client.get(f"/v1/operations/{quote(key, safe='')}", headers=auth()).get_json()["events"]


def kept(evs):
    return [e["detail"]["receipt_kept"] for e in evs if "receipt_kept" in (e["detail"] or {})]


def kept_stale():
    """The fenced-out receipts the ledger kept (audit rows: the operation's state did not move)."""
    with db.connection_context():
        return [r.detail["receipt_kept"] for r in AuditLog.select().where(AuditLog.action == "receipt_kept")
                .order_by(AuditLog.id)]


def moves(evs, to_state):
    return [e for e in evs if e["to_state"] == to_state and e["from_state"] != to_state]


def test_attempts_confirm_from_another_execution_is_not_confirmed(client):
    """Defect 10: n8n's Retry of a crashed execution (a new id) confirms a second write."""
    tok = lease(client)
    out = begin(client, tok, n8n(10))
    key = out["operation"]["operation_key"]
    assert (out["decision"], out["operation"]["dispatched_by"]) == ("dispatch", "10")
    r = confirm(client, key, tok, "order-2", n8n(12))
    assert r.status_code == 200, r.get_json()
    body = r.get_json()
    assert (body["decision"], body["reason"]) == ("needs_review", "execution_mismatch")  # no reconciler for it
    assert body["attempt_binding"] == {"standing": "execution_mismatch", "dispatched_by": "10", "reported_by": "12",
                                       "receipt_kept": True}
    assert body["operation"]["state"] == "NEEDS_REVIEW" and body["operation"]["remote_id"] is None
    evs = events(client, key)
    assert len(moves(evs, "CONFIRMED")) == 0
    assert [(k["execution_id"], k["remote_id"], k["standing"]) for k in kept(evs)] == \
        [("12", "order-2", "execution_mismatch")]
    assert [e["detail"]["n8n"]["execution_id"] for e in moves(evs, "SENT")] == ["10"]
    # A retried call of the same execution keeps nothing new.
    assert confirm(client, key, tok, "order-2", n8n(12)).get_json()["operation"]["state"] == "NEEDS_REVIEW"
    assert len(kept(events(client, key))) == 1
    item = client.get(f"/v1/reviews/{quote(key, safe='')}", headers=EDITOR).get_json()
    assert [(c["id"], c["source"]) for c in item["candidates"]] == [("order-2", "caller_receipt")]
    assert item["last_error"]["kind"] == "execution_mismatch"
    # The attempt's own execution still settles it (late evidence settles a review); the other
    # execution's receipt stays on the record.
    r = confirm(client, key, tok, "order-1", n8n(10))
    assert r.get_json()["operation"]["state"] == "CONFIRMED" and "decision" not in r.get_json()
    evs = events(client, key)
    assert [e["detail"]["remote_id"] for e in moves(evs, "CONFIRMED")] == ["order-1"]
    assert [k["remote_id"] for k in kept(evs)] == ["order-2"]


def test_attempts_another_execution_with_a_reconciler_goes_to_unknown(client, reconciler):
    scripted = reconciler()
    tok = lease(client)
    key = begin(client, tok, n8n(10))["operation"]["operation_key"]
    body = confirm(client, key, tok, "order-2", n8n(12)).get_json()
    assert (body["decision"], body["operation"]["state"]) == ("reconcile", "UNKNOWN")
    # The reconciler's verdict (absent) would allow a retry; a kept receipt of ANOTHER execution
    # is not the attempt's, so it is not verified on its own: the lookup decides.
    assert scripted.verified == []


@pytest.mark.parametrize("verb,body,state", [
    ("fail", {"retryable": True, "error": {"message": "409 duplicate"}}, "NEEDS_REVIEW"),
    ("unknown", {"error": {"message": "timeout"}}, "NEEDS_REVIEW"),
    ("outcome", {"http_status": 400}, "NEEDS_REVIEW"),
])
def test_attempts_outcome_from_another_execution_is_not_applied(client, verb, body, state):
    tok = lease(client)
    key = begin(client, tok, n8n(10))["operation"]["operation_key"]
    r = client.post(f"/v1/operations/{quote(key, safe='')}/{verb}", headers=n8n(12), json={"fencing_token": tok, **body})
    assert r.status_code == 200, r.get_json()
    assert (r.get_json()["operation"]["state"], r.get_json()["reason"]) == (state, "execution_mismatch")
    evs = events(client, key)
    assert len(moves(evs, "FAILED")) == 0 and len(kept(evs)) == 1


@pytest.mark.parametrize("begin_headers,confirm_headers", [
    (auth(), auth()),  # curl, Python clients: the token alone binds, as before
    (auth(), n8n(12)),  # dispatched without an execution id
    (n8n(10), auth()),  # confirmed without one
    (n8n(10), n8n(10)),  # the same execution (a Wait node keeps the id)
])
def test_attempts_calls_without_two_execution_ids_confirm_as_before(client, begin_headers, confirm_headers):
    tok = lease(client)
    key = begin(client, tok, begin_headers)["operation"]["operation_key"]
    body = confirm(client, key, tok, "order-1", confirm_headers).get_json()
    assert body["operation"]["state"] == "CONFIRMED" and "decision" not in body
    evs = events(client, key)
    assert len(moves(evs, "CONFIRMED")) == 1 and kept(evs) == []


def test_attempts_batch_confirm_from_another_execution_is_not_confirmed(client):
    tok = lease(client)
    key = begin(client, tok, n8n(10))["operation"]["operation_key"]
    r = client.post("/v1/operations/batch", headers=n8n(12), json={"confirm": [
        {"operation_key": key, "fencing_token": tok, "remote_id": "order-2"}]})
    (slot,) = r.get_json()["confirm"]
    assert (slot["operation"]["state"], slot["reason"]) == ("NEEDS_REVIEW", "execution_mismatch")
    assert len(moves(events(client, key), "CONFIRMED")) == 0


def _taken_over(client):
    """Defect 11: A begins and writes, B takes over and begins (reconcile: no reconciler yet, or
    A's write is still in flight)."""
    tok_a = lease(client, owner="a")
    key = begin(client, tok_a, n8n(20))["operation"]["operation_key"]
    tok_b = lease(client, owner="b", takeover=True)
    assert begin(client, tok_b, n8n(21))["decision"] == "reconcile"
    return key, tok_a, tok_b


def test_attempts_fenced_out_answer_of_its_own_attempt_settles_the_step(client):
    """Issue 37: A's confirm after the takeover is the answer of the attempt in flight (same
    attempt, its token, its execution): CONFIRMED, and B reads Done Before. Nobody reviews it."""
    key, tok_a, tok_b = _taken_over(client)
    r = confirm(client, key, tok_a, "order-1", n8n(20))
    assert r.status_code == 200 and r.get_json()["operation"]["state"] == "CONFIRMED", r.get_json()
    out = begin(client, tok_b, n8n(21))
    assert (out["decision"], out["receipt"]["remote_id"]) == ("reuse_receipt", "order-1"), out
    evs = events(client, key)
    assert len(moves(evs, "SENT")) == 1 and len(moves(evs, "CONFIRMED")) == 1
    assert moves(evs, "CONFIRMED")[0]["detail"]["reason"] == "own_answer_after_takeover"
    assert confirm(client, key, tok_a, "order-1", n8n(20)).status_code == 200  # a retried confirm: the same


def test_attempts_fenced_out_failure_or_unknown_does_not_settle(client):
    """Only a receipt settles: A's stale unknown is kept as evidence and refused, as before."""
    key, tok_a, tok_b = _taken_over(client)
    r = client.post(f"/v1/operations/{quote(key, safe='')}/unknown", headers=n8n(20),
                    json={"fencing_token": tok_a, "error": {"message": "timeout"}})
    assert (r.status_code, r.get_json()["error"]["code"]) == (409, "stale_fencing_token")
    assert len(moves(events(client, key), "CONFIRMED")) == 0


def test_attempts_stale_receipt_of_another_execution_is_the_review_candidate(client):
    """A Retry of A (another execution, A's token: Save Execution Progress) wrote again: its
    receipt does not settle the attempt, it is the review's candidate, one click away."""
    key, tok_a, tok_b = _taken_over(client)
    r = confirm(client, key, tok_a, "order-2", n8n(22))
    assert r.status_code == 409 and r.get_json()["error"]["code"] == "stale_fencing_token"
    details = r.get_json()["error"]["details"]
    assert (details["receipt_kept"], details["remote_id"], details["state"]) == (True, "order-2", "SENT")
    assert [(k["standing"], k["remote_id"], k["current_attempt"]) for k in kept_stale()] == \
        [("stale_fencing_token", "order-2", False)]
    r = client.post(f"/v1/operations/{quote(key, safe='')}/reconcile", headers=EDITOR)  # what the sweeper does
    assert r.get_json()["operation"]["state"] == "NEEDS_REVIEW"
    item = client.get(f"/v1/reviews/{quote(key, safe='')}", headers=EDITOR).get_json()
    assert [(c["id"], c["standing"], c["execution_id"]) for c in item["candidates"]] == \
        [("order-2", "stale_fencing_token", "22")]
    r = client.post(f"/v1/reviews/{quote(key, safe='')}/resolve", headers=EDITOR,
                    json={"decision": "confirm", "remote_id": item["candidates"][0]["id"]})  # one click
    assert r.get_json()["operation"]["state"] == "CONFIRMED"
    assert begin(client, tok_b, n8n(21))["decision"] == "reuse_receipt"


def test_attempts_own_answer_after_review_settles_it_and_lookup_absent_cannot_undo_it(client):
    """B's lookup said absent while A's request was in flight (NEEDS_REVIEW: nothing can decide);
    A's answer then arrives: CONFIRMED, and nothing is dispatched again."""
    key, tok_a, tok_b = _taken_over(client)
    r = client.post(f"/v1/operations/{quote(key, safe='')}/lookup-result", headers=n8n(21),
                    json={"fencing_token": tok_b, "attempt": 1, "result": "undecidable"})
    assert r.get_json()["operation"]["state"] == "NEEDS_REVIEW", r.get_json()
    assert confirm(client, key, tok_a, "order-1", n8n(20)).get_json()["operation"]["state"] == "CONFIRMED"
    assert begin(client, tok_b, n8n(21))["decision"] == "reuse_receipt"
    evs = events(client, key)
    assert len(moves(evs, "SENT")) == 1 and len(moves(evs, "FAILED")) == 0


def test_attempts_every_claim_records_its_execution(client):
    """The one-statement begin, the batch claim (PostgreSQL's multi-row statement) and a retry
    claim each store the caller's execution as the attempt's dispatcher."""
    tok = lease(client)
    r = client.post("/v1/operations/batch", headers=n8n(40), json={"begin": [
        {"job_id": "a1", "action": f"order-{i}", "payload": {"i": i}, "fencing_token": tok} for i in range(3)]})
    assert [s["operation"]["dispatched_by"] for s in r.get_json()["begin"]] == ["40", "40", "40"]
    key = r.get_json()["begin"][0]["operation"]["operation_key"]
    client.post(f"/v1/operations/{quote(key, safe='')}/fail", headers=n8n(40), json={"fencing_token": tok})
    out = client.post("/v1/operations/begin", headers=n8n(41), json={
        "job_id": "a1", "action": "order-0", "payload": {"i": 0}, "fencing_token": tok}).get_json()
    assert (out["decision"], out["operation"]["attempt"], out["operation"]["dispatched_by"]) == ("dispatch", 2, "41")
    assert confirm(client, key, tok, "o-0", n8n(40)).get_json()["reason"] == "execution_mismatch"


def test_attempts_a_fenced_out_outcome_on_a_settled_step_is_stale_not_invalid_transition(client):
    """A frozen worker wakes after the new owner settled the step (queue mode, SIGSTOP past the
    lock): its late timeout must read as what happened, the job was taken over, and its report is
    kept as evidence; only a current owner hears invalid_transition."""
    tok_a = lease(client, owner="worker-1")
    key = begin(client, tok_a, n8n(30))["operation"]["operation_key"]
    tok_b = lease(client, owner="worker-2", takeover=True)
    r = client.post(f"/v1/operations/{quote(key, safe='')}/lookup-result", headers=n8n(31),
                    json={"fencing_token": tok_b, "attempt": 1, "result": "found", "remote_id": "order-1",
                          "receipt": {}, "evidence": {}})
    assert r.get_json()["operation"]["state"] == "CONFIRMED", r.get_json()
    late = client.post(f"/v1/operations/{quote(key, safe='')}/unknown", headers=n8n(30),
                       json={"fencing_token": tok_a, "error": {"message": "timeout"}})
    assert (late.status_code, late.get_json()["error"]["code"]) == (409, "stale_fencing_token"), late.get_json()
    own = client.post(f"/v1/operations/{quote(key, safe='')}/unknown", headers=n8n(31),
                      json={"fencing_token": tok_b, "error": {"message": "timeout"}})
    assert (own.status_code, own.get_json()["error"]["code"]) == (409, "invalid_transition"), own.get_json()
    evs = events(client, key)
    assert [e["to_state"] for e in evs if e["to_state"] in ("CONFIRMED", "UNKNOWN")] == ["CONFIRMED"]
