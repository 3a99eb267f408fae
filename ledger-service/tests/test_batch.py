"""POST /v1/operations/batch: many items in one request, each answered as its single route would.

On PostgreSQL the items nothing stands in the way of are claimed by one statement and confirmed
by one more (store/postgres.py `_BEGIN_MANY`, `_CONFIRM_MANY`); every other item, and every item
on SQLite, goes through the single-item gate. Both backends run every test; the counts come from
the operation and event tables.
"""

from conftest import auth

from durable_ledger.store.models import Operation, OperationEvent


def _job(client, job_id, token="runner-token", **body):
    client.put(f"/v1/jobs/{job_id}", headers=auth(token), json=body)
    return client.post(f"/v1/jobs/{job_id}/lease", headers=auth(token), json={"owner": "w"}).get_json()["fencing_token"]


def _batch(client, token="runner-token", **body):
    r = client.post("/v1/operations/batch", headers=auth(token), json=body)
    assert r.status_code == 200, r.get_json()
    return r.get_json()


def _events(to_state):
    return OperationEvent.select().where(OperationEvent.to_state == to_state).count()


def test_a_hundred_begins_and_confirms_each_once(client):
    t = _job(client, "b1")
    items = [{"job_id": "b1", "action": f"send:{i}", "payload": {"i": i}, "fencing_token": t} for i in range(100)]
    body = _batch(client, begin=items)
    assert [b["decision"] for b in body["begin"]] == ["dispatch"] * 100
    keys = [b["operation"]["operation_key"] for b in body["begin"]]
    assert keys == [f"acme:b1:v1:send:{i}" for i in range(100)]  # in order, each its own
    assert (Operation.select().count(), _events("SENT")) == (100, 100)
    again = _batch(client, begin=items)  # a retried request: nothing is dispatched twice
    assert {b["decision"] for b in again["begin"]} == {"reconcile"}
    confirms = [{"operation_key": k, "fencing_token": t, "remote_id": f"r-{n}"} for n, k in enumerate(keys)]
    body = _batch(client, confirm=confirms)
    assert [c["operation"]["state"] for c in body["confirm"]] == ["CONFIRMED"] * 100
    assert [c["operation"]["remote_id"] for c in body["confirm"]] == [f"r-{n}" for n in range(100)]
    assert _events("CONFIRMED") == 100
    assert {e.detail["remote_id"] for e in OperationEvent.select().where(OperationEvent.to_state == "CONFIRMED")} \
        == {f"r-{n}" for n in range(100)}
    body = _batch(client, confirm=confirms, begin=items)  # retried again: answered from the receipts
    assert [c["operation"]["state"] for c in body["confirm"]] == ["CONFIRMED"] * 100
    assert [b["receipt"]["remote_id"] for b in body["begin"]] == [f"r-{n}" for n in range(100)]
    assert (_events("SENT"), _events("CONFIRMED")) == (100, 100)


def test_a_repeated_key_in_one_batch_is_dispatched_once(client):
    t = _job(client, "b2")
    item = {"job_id": "b2", "action": "send", "operation_key": "same", "payload": {}, "fencing_token": t}
    body = _batch(client, begin=[item, item, {**item, "operation_key": None, "action": "x"}, {**item, "action": "x",
                                                                                             "operation_key": None}])
    assert [b["decision"] for b in body["begin"]] == ["dispatch", "reconcile", "dispatch", "reconcile"]
    assert (Operation.select().count(), _events("SENT")) == (2, 2)
    body = _batch(client, confirm=[{"operation_key": "same", "fencing_token": t, "remote_id": "a"},
                                   {"operation_key": "same", "fencing_token": t, "remote_id": "b"}])
    assert body["confirm"][0]["operation"]["remote_id"] == "a"  # the first one wins, as in order
    assert body["confirm"][1]["error"]["code"] == "receipt_conflict"
    assert _events("CONFIRMED") == 1


def test_each_item_keeps_its_own_fence_digest_and_tenant(client):
    t = _job(client, "b3")
    client.post("/v1/jobs/b3/lease", headers=auth(), json={"owner": "w2", "takeover": True})  # t is stale now
    fresh = t + 1
    _job(client, "theirs", token="other-token")
    ok = {"job_id": "b3", "action": "ok", "payload": {}, "fencing_token": fresh}
    body = _batch(client, begin=[ok, {**ok, "action": "stale", "fencing_token": t},
                                 {**ok, "action": "never", "fencing_token": fresh + 5},
                                 {**ok, "job_id": "theirs", "action": "intruder"},
                                 {**ok, "action": "ok", "payload": {"other": 1}}])
    slots = [b.get("decision") or b["error"]["code"] for b in body["begin"]]
    assert slots == ["dispatch", "stale_fencing_token", "fencing_token_not_issued", "job_not_found", "digest_mismatch"]
    assert [o.action for o in Operation.select()] == ["ok"]
    body = _batch(client, confirm=[{"operation_key": "acme:b3:v1:ok", "fencing_token": t, "remote_id": "x"},
                                   {"operation_key": "acme:b3:v1:ok", "fencing_token": fresh, "remote_id": "y"}],
                  token="runner-token")
    assert body["confirm"][0]["error"]["code"] == "stale_fencing_token"
    assert body["confirm"][1]["operation"]["remote_id"] == "y"
    other = _batch(client, token="other-token",
                   confirm=[{"operation_key": "acme:b3:v1:ok", "fencing_token": fresh, "remote_id": "z"}])
    assert other["confirm"][0]["error"]["code"] == "operation_not_found"  # another tenant's key is no key
    assert Operation.get().remote_id == "y"


def test_stopped_jobs_budgets_and_approvals_are_left_to_the_gate(client):
    t = _job(client, "b4", budgets={"max_tool_calls": 2})
    items = [{"job_id": "b4", "action": f"s{i}", "payload": {}, "fencing_token": t} for i in range(4)]
    assert [b["decision"] for b in _batch(client, begin=items)["begin"]] == ["dispatch", "dispatch", "halt", "halt"]
    a = _job(client, "b5", pipeline="article")
    gated = [{"job_id": "b5", "action": "publish", "payload": {}, "fencing_token": a},
             {"job_id": "b5", "action": "other", "payload": {}, "fencing_token": a, "requires_approval": True}]
    assert [b.get("reason") for b in _batch(client, begin=gated)["begin"]] == ["approval_required"] * 2
    c = _job(client, "b6")
    client.post("/v1/jobs/b6/cancel", headers=auth(), json={})
    body = _batch(client, begin=[{"job_id": "b6", "action": "s", "payload": {}, "fencing_token": c}])
    assert (body["begin"][0]["decision"], body["begin"][0]["reason"]) == ("halt", "cancelled")
    assert Operation.select().where(Operation.state == "SENT").count() == 2
