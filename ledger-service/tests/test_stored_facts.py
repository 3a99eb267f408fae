"""Once an operation key exists, the stored row decides: a begin that names another job, action,
target or request for it is refused (422, a code naming the field), the approval need is the
stored row's and the job's pipeline's, and the batch route answers every item as the single
route would for the same sequence of calls. Both backends; counts from the tables.
"""

import pytest
from conftest import auth

from durable_ledger.store.models import Operation, OperationEvent

DIGEST = "a" * 64


def _job(client, job_id, token="runner-token", **body):
    client.put(f"/v1/jobs/{job_id}", headers=auth(token), json=body)
    return client.post(f"/v1/jobs/{job_id}/lease", headers=auth(token), json={"owner": "w"}).get_json()["fencing_token"]


def _begin(client, **body):
    return client.post("/v1/operations/begin", headers=auth(), json=body)


def _sent(key=None):
    q = OperationEvent.select().where(OperationEvent.to_state == "SENT")
    if key is not None:
        q = q.join(Operation).where(Operation.operation_key == key)
    return q.count()


def _approve(client, key, digest):
    r = client.post(f"/v1/operations/{key}/approve", headers=auth("approver-token"), json={"content_digest": digest})
    assert r.status_code == 201, r.get_json()
    return r.get_json()["approval"]["id"]


@pytest.mark.parametrize("renamed", ["set_status", "publish_later", "update"])
def test_a_prepared_publish_cannot_be_renamed_into_a_dispatch(client, renamed):
    t = _job(client, "art", pipeline="article")
    step = {"job_id": "art", "action": "publish", "payload": {"post_id": 9, "content_sha256": DIGEST},
            "target": "wordpress:site", "fencing_token": t, "operation_key": "acme:art:publish:9"}
    first = _begin(client, **step).get_json()
    assert (first["decision"], first["reason"]) == ("halt", "approval_required")
    r = _begin(client, **{**step, "action": renamed})
    assert r.status_code == 422
    err = r.get_json()["error"]
    assert (err["code"], err["details"]["field"], err["details"]["stored"]) == ("action_mismatch", "action", "publish")
    op = Operation.get(Operation.operation_key == "acme:art:publish:9")
    assert (op.state, op.action, op.requires_approval, _sent()) == ("PREPARED", "publish", True, 0)


def test_requires_approval_is_never_lowered_by_a_later_begin(client):
    t = _job(client, "gen")
    step = {"job_id": "gen", "action": "notify", "payload": {"to": "all"}, "fencing_token": t,
            "requires_approval": True}
    first = _begin(client, **step).get_json()
    assert first["reason"] == "approval_required"
    for lowered in ({"requires_approval": False}, {}):
        body = {k: v for k, v in step.items() if k != "requires_approval"} | lowered
        again = _begin(client, **body).get_json()
        assert (again["decision"], again["reason"]) == ("halt", "approval_required")
    assert _sent() == 0
    _approve(client, first["operation"]["operation_key"], first["operation"]["request_hash"])
    assert _begin(client, **{**step, "requires_approval": False}).get_json()["decision"] == "dispatch"
    assert _sent() == 1


def test_a_retry_of_an_approved_step_still_needs_the_approval(client):
    """FAILED (retryable) after an approved dispatch: a retry that omits requires_approval is
    still bound to a live approval; revoked, it halts."""
    t = _job(client, "gen2")
    step = {"job_id": "gen2", "action": "notify", "payload": {"n": 1}, "fencing_token": t, "requires_approval": True}
    asked = _begin(client, **step).get_json()["operation"]
    approval = _approve(client, asked["operation_key"], asked["request_hash"])
    op = _begin(client, **step).get_json()["operation"]
    assert op["state"] == "SENT"
    r = client.post(f"/v1/operations/{op['operation_key']}/fail", headers=auth(),
                    json={"fencing_token": t, "retryable": True, "error": {"m": "x"}})
    assert r.status_code == 200, r.get_json()
    assert client.delete(f"/v1/approvals/{approval}", headers=auth("approver-token")).status_code == 200
    again = _begin(client, **{k: v for k, v in step.items() if k != "requires_approval"}).get_json()
    assert (again["decision"], again["reason"]) == ("halt", "approval_required")
    assert _sent() == 1


def test_target_and_job_of_a_stored_key_are_the_stored_ones(client):
    t = _job(client, "j1")
    t2 = _job(client, "j2")
    step = {"job_id": "j1", "action": "send", "payload": {"p": 1}, "target": "wordpress:a", "fencing_token": t,
            "operation_key": "acme:shared"}
    assert _begin(client, **step).get_json()["decision"] == "dispatch"
    r = _begin(client, **{**step, "target": "wordpress:b"})
    assert (r.status_code, r.get_json()["error"]["code"]) == (422, "target_mismatch")
    # Naming no target is not another target: the stored row's applies (the step is in flight).
    assert _begin(client, **{**step, "target": None}).get_json()["decision"] == "reconcile"
    r = _begin(client, **{**step, "job_id": "j2", "fencing_token": t2})
    assert (r.status_code, r.get_json()["error"]["code"]) == (422, "job_mismatch")
    assert (_sent(), Operation.select().count()) == (1, 1)


def _batch(client, items):
    r = client.post("/v1/operations/batch", headers=auth(), json={"begin": items})
    assert r.status_code == 200, r.get_json()
    return [b.get("decision") or b["error"]["code"] for b in r.get_json()["begin"]]


def test_a_default_key_and_the_same_explicit_key_in_one_batch_dispatch_once(client):
    t = _job(client, "dup")
    a = {"job_id": "dup", "action": "alias", "payload": {"p": 1}, "fencing_token": t}
    b = {**a, "operation_key": "acme:dup:v1:alias"}
    assert _batch(client, [a, b]) == ["dispatch", "reconcile"]
    assert (_sent("acme:dup:v1:alias"), Operation.select().count()) == (1, 1)


def test_a_changed_payload_under_the_same_computed_key_is_a_digest_mismatch_in_a_batch(client):
    t = _job(client, "dup2")
    a = {"job_id": "dup2", "action": "alias", "payload": {"p": 1}, "fencing_token": t}
    b = {**a, "operation_key": "acme:dup2:v1:alias", "payload": {"p": 2}}
    assert _batch(client, [a, b]) == ["dispatch", "digest_mismatch"]
    assert _sent() == 1


def test_one_explicit_key_for_two_jobs_in_one_batch(client):
    t1, t2 = _job(client, "x1"), _job(client, "x2")
    a = {"job_id": "x1", "action": "send", "payload": {"p": 1}, "fencing_token": t1, "operation_key": "acme:k"}
    b = {**a, "job_id": "x2", "fencing_token": t2}
    assert _batch(client, [a, b]) == ["dispatch", "job_mismatch"]
    assert _sent() == 1
    assert Operation.get(Operation.operation_key == "acme:k").job.job_id == "x1"


def test_a_renamed_action_after_an_approval_wait_in_one_batch(client):
    """The ineligible first item (it may need an approval) still counts for the key: the second
    item is not claimed past it by the multi-row statement."""
    t = _job(client, "art2", pipeline="article")
    pub = {"job_id": "art2", "action": "publish", "payload": {"post_id": 1}, "fencing_token": t,
           "operation_key": "acme:art2:pub"}
    assert _batch(client, [pub, {**pub, "action": "set_status"}]) == ["halt", "action_mismatch"]
    pub2 = {**pub, "operation_key": "acme:art2:pub2"}
    assert _batch(client, [{**pub2, "action": "set_status"}, pub2]) == ["dispatch", "action_mismatch"]
    assert _sent() == 1
    assert Operation.get(Operation.operation_key == "acme:art2:pub").action == "publish"
    assert Operation.get(Operation.operation_key == "acme:art2:pub2").action == "set_status"


def test_batch_answers_equal_the_single_route_in_sequence(client):
    """The same ten items sent one by one to /begin and as one batch (in fresh jobs of the same
    shape) give the same decisions and codes in the same order."""
    def items(job, t):
        base = {"job_id": job, "payload": {"p": 1}, "fencing_token": t}
        k = f"acme:{job}:v1:a"
        return [{**base, "action": "a"}, {**base, "action": "a", "operation_key": k},
                {**base, "action": "a", "operation_key": k, "payload": {"p": 2}},
                {**base, "action": "b", "operation_key": k}, {**base, "action": "b"},
                {**base, "action": "b", "target": "t:1"}, {**base, "action": "c", "operation_key": f"acme:{job}:v1:b"},
                {**base, "action": "publish", "requires_approval": True}, {**base, "action": "publish"},
                {**base, "action": "d", "fencing_token": t + 9}]
    t1, t2 = _job(client, "seq1"), _job(client, "seq2")
    single = []
    for body in items("seq1", t1):
        r = _begin(client, **body).get_json()
        single.append(r.get("decision") or r["error"]["code"])
    assert _batch(client, items("seq2", t2)) == single
    assert single[:4] == ["dispatch", "reconcile", "digest_mismatch", "action_mismatch"]


def test_the_proxy_forwards_an_approval_bound_write_only_while_its_approval_is_live(client):
    """The gate spent an approval when it dispatched; a gateway that forwards the write checks
    again (a revoked approval stops a retried forward of the same SENT operation)."""
    from durable_ledger.gate.dispatch_auth import WriteNotDispatched, authorize_write

    t = _job(client, "art3", pipeline="article")
    payload = {"post_id": 9, "status": "publish"}
    step = {"job_id": "art3", "action": "publish", "payload": payload, "target": "wordpress:site",
            "fencing_token": t}
    asked = _begin(client, **step).get_json()["operation"]
    approval = _approve(client, asked["operation_key"], asked["request_hash"])
    assert _begin(client, **step).get_json()["decision"] == "dispatch"
    grant = authorize_write("acme", asked["operation_key"], "wordpress:site", payload, publish=True)
    assert grant.action == "publish"
    assert client.delete(f"/v1/approvals/{approval}", headers=auth("approver-token")).status_code == 200
    with pytest.raises(WriteNotDispatched) as refused:
        authorize_write("acme", asked["operation_key"], "wordpress:site", payload, publish=True)
    assert refused.value.details["reason"] == "approval_required"


def test_a_claim_that_lost_its_key_to_the_last_tool_call_is_a_lost_race_not_a_budget_refusal(client):
    """Two begins of one key read "no row, 0 of 1 calls used"; the first claims. The second's
    claim must come back as a lost race (its next round reads the SENT row: reconcile), not as
    budget_exhausted, which no serial order answers for a step in flight."""
    import time

    from durable_ledger import store
    from durable_ledger.gate import decide as D
    from durable_ledger.store.rows import NewOp

    t = _job(client, "calls", budgets={"max_tool_calls": 1})
    first = _begin(client, job_id="calls", action="a", payload={}, fencing_token=t).get_json()
    assert first["decision"] == "dispatch"
    op = Operation.get(Operation.operation_key == first["operation"]["operation_key"])
    now = time.time()
    twin = NewOp("acme", op.operation_key, op.job_id, 1, "a", op.request_hash, t, None, False, 3, "test", None, now)
    assert store.claim_new(twin, lambda guard: D.budget_refusal(guard, now), True, {}) is None
    again = _begin(client, job_id="calls", action="a", payload={}, fencing_token=t).get_json()
    assert (again["decision"], again["reason"]) == ("reconcile", "in_flight")
    assert _sent() == 1


def test_a_prepare_that_lost_its_key_to_another_payload_is_a_digest_mismatch(client, monkeypatch):
    """Stateful finding F4: a begin decides "no row: prepare" while another payload's begin of the
    same key prepares first (run inside store.insert_prepared here, deterministically)."""
    from durable_ledger import store
    from durable_ledger.auth import Principal
    from durable_ledger import gate

    t = _job(client, "f4", pipeline="article")
    real, raced = store.insert_prepared, []

    def racing(new, detail):
        if not raced:  # the first PREPARE only: the racing begin's own insert goes through
            raced.append(None)
            raced[0] = gate.begin(Principal("acme", "runner", "test"), "f4", "publish", t, payload={"p": 1})
        return real(new, detail)

    monkeypatch.setattr(store, "insert_prepared", racing)
    r = _begin(client, job_id="f4", action="publish", payload={"p": 2}, fencing_token=t,
               operation_key="acme:f4:v1:publish")
    assert raced[0].reason == "approval_required"
    assert (r.status_code, r.get_json()["error"]["code"]) == (422, "digest_mismatch")
    assert Operation.select().count() == 1 and _sent() == 0
