"""Reconcile through the caller: POST /v1/operations/{key}/lookup-result (gate/lookup.py).

The operations here have no server-side reconciler (target `sheet:...`), so begin answers
`reconcile` with `no_reconciler`; the test plays the n8n workflow that looked the object up."""

from urllib.parse import quote

import pytest

from conftest import auth


@pytest.fixture
def tok(client):
    client.put("/v1/jobs/l1", json={}, headers=auth())
    return client.post("/v1/jobs/l1/lease", json={"owner": "w"}, headers=auth()).get_json()["fencing_token"]


def begin(client, tok, payload=None, **extra):
    r = client.post("/v1/operations/begin", headers=auth(), json={
        "job_id": "l1", "action": "append_row", "target": "sheet:orders", "payload": payload or {"order": 7},
        "fencing_token": tok, **extra})
    assert r.status_code == 200, r.get_json()
    return r.get_json()


def report(client, key, tok, attempt, result, **extra):
    return client.post(f"/v1/operations/{quote(key, safe='')}/lookup-result", headers=auth(),
                       json={"fencing_token": tok, "attempt": attempt, "result": result, **extra})


def events(client, key):
    body = client.get(f"/v1/operations/{quote(key, safe='')}", headers=auth()).get_json()
    return [e["to_state"] for e in body["events"]]


@pytest.fixture
def in_flight(client, tok):
    """An operation left SENT (the run died after dispatch); the next begin asks for a lookup."""
    key = begin(client, tok)["operation"]["operation_key"]
    again = begin(client, tok)
    assert again["decision"] == "reconcile" and again["reconciliation"] == {"outcome": "no_reconciler"}
    assert again["operation"]["state"] == "SENT"  # begin never escalates on its own
    return key


def test_lookup_found_confirms_and_answers_reuse_receipt(client, tok, in_flight):
    r = report(client, in_flight, tok, 1, "found", remote_id="row-17", receipt={"sheet_row": 17})
    assert r.status_code == 200, r.get_json()
    out = r.get_json()
    assert out["decision"] == "reuse_receipt" and out["operation"]["state"] == "CONFIRMED"
    assert out["receipt"] == {"remote_id": "row-17", "sheet_row": 17}
    assert out["lookup"] == {"outcome": "applied", "verdict": "found", "attempt": 1}
    assert begin(client, tok)["decision"] == "reuse_receipt"
    assert events(client, in_flight) == ["SENT", "CONFIRMED"]


def test_lookup_absent_dispatches_the_next_attempt(client, tok, in_flight):
    out = report(client, in_flight, tok, 1, "absent", evidence={"query": "key = ..."}).get_json()
    assert (out["decision"], out["operation"]["state"], out["operation"]["attempt"]) == ("dispatch", "SENT", 2)
    assert events(client, in_flight) == ["SENT", "FAILED", "SENT"]


def test_lookup_absent_retried_never_fails_the_next_attempt(client, tok, in_flight):
    report(client, in_flight, tok, 1, "absent")
    again = report(client, in_flight, tok, 1, "absent").get_json()  # the answer was lost; sent again
    assert again["lookup"]["outcome"] == "not_in_flight"
    assert again["decision"] == "reconcile" and again["operation"]["attempt"] == 2
    assert events(client, in_flight) == ["SENT", "FAILED", "SENT"]  # attempt 2 untouched


def test_lookup_undecidable_goes_to_review(client, tok, in_flight):
    out = report(client, in_flight, tok, 1, "undecidable", evidence={"detail": "two rows"}).get_json()
    assert out["decision"] == "needs_review" and out["operation"]["state"] == "NEEDS_REVIEW"
    queue = client.get("/v1/reviews", headers=auth("editor-token")).get_json()["reviews"]
    assert [q["operation_key"] for q in queue] == [in_flight]


def test_lookup_is_fenced(client, tok, in_flight):
    newer = client.post("/v1/jobs/l1/lease", json={"owner": "other", "takeover": True},
                        headers=auth()).get_json()["fencing_token"]
    r = report(client, in_flight, tok, 1, "absent")
    assert r.status_code == 409 and r.get_json()["error"]["code"] == "stale_fencing_token"
    assert events(client, in_flight) == ["SENT"]
    assert report(client, in_flight, newer, 1, "absent").get_json()["decision"] == "dispatch"


def test_lookup_found_needs_remote_id(client, tok, in_flight):
    r = report(client, in_flight, tok, 1, "found")
    assert r.status_code == 422 and r.get_json()["error"]["details"] == {"field": "remote_id"}
    assert report(client, in_flight, tok, 1, "maybe").status_code == 422
    assert events(client, in_flight) == ["SENT"]


def test_lookup_after_a_late_confirm_changes_nothing(client, tok, in_flight):
    client.post(f"/v1/operations/{quote(in_flight, safe='')}/confirm", headers=auth(),
                json={"fencing_token": tok, "remote_id": "row-1"})
    out = report(client, in_flight, tok, 1, "absent").get_json()
    assert out["decision"] == "reuse_receipt" and out["lookup"]["outcome"] == "not_in_flight"


def test_lookup_absent_respects_the_attempt_budget(client):
    client.put("/v1/jobs/l2", json={"budgets": {"max_attempts": 1}}, headers=auth())
    t = client.post("/v1/jobs/l2/lease", json={"owner": "w"}, headers=auth()).get_json()["fencing_token"]
    body = {"job_id": "l2", "action": "send_mail", "target": "smtp:x", "payload": {}, "fencing_token": t}
    key = client.post("/v1/operations/begin", headers=auth(), json=body).get_json()["operation"]["operation_key"]
    out = report(client, key, t, 1, "absent").get_json()
    assert (out["decision"], out["reason"]) == ("halt", "retry_budget_exhausted")


def test_lookup_unknown_operation_is_404(client, tok):
    assert report(client, "nope", tok, 1, "absent").status_code == 404
