"""The side-effect ledger through the core API (no HTTP), on SQLite and PostgreSQL."""

import pytest

from durable_ledger.auth import Principal
from durable_ledger.jobs import jobs, leases
from durable_ledger.gate.answers import answer_dict
from durable_ledger import gate
from durable_ledger.gate import outcomes as ops
from durable_ledger.kernel import states as S
from durable_ledger.jobs.budgets import tool_calls_used
from durable_ledger.kernel.digest import request_digest
from durable_ledger.kernel.errors import (DigestMismatch, InvalidTransition, LeaseLost, ReceiptConflict,
                                          StaleFencingToken, ValidationFailed)
from durable_ledger.store.models import Job, Operation, OperationEvent

PAYLOAD = {"title": "Hello", "content": "Body"}


@pytest.fixture
def job(conn, runner):
    jobs.create_or_get_job("acme", "job-1", pipeline="article")
    _, lease = leases.acquire_lease("acme", "job-1", "w1", 60)
    return lease.fencing_token


def _begin(runner, token, payload=PAYLOAD, action="create_draft", **kw):
    return answer_dict(gate.begin(runner, "job-1", action, token, payload=payload, **kw))


def _seed(runner, token, state):
    """Put the default create_draft operation into ``state`` through the public transitions."""
    key = _begin(runner, token)["operation"]["operation_key"]
    if state == S.CONFIRMED:
        ops.confirm(runner, key, token, 101, {"link": "x"})
    elif state == S.FAILED:
        ops.fail(runner, key, token, True, {"http_status": 400})
    elif state == S.UNKNOWN:
        ops.mark_unknown(runner, key, token, {"kind": "timeout"})
    elif state in (S.NEEDS_REVIEW, S.ABANDONED):
        Operation.update(state=state).where(Operation.operation_key == key).execute()
    return key


def test_begin_first_time_dispatches_and_persists_sent(job, runner):
    out = _begin(runner, job)
    assert out["decision"] == "dispatch"
    op = Operation.get(Operation.operation_key == "acme:job-1:v1:create_draft")
    assert op.state == S.SENT and op.attempt == 1 and op.fencing_token == job
    assert op.request_hash == request_digest(PAYLOAD)
    assert [e.to_state for e in OperationEvent.select()] == [S.SENT]
    assert tool_calls_used(Job.get()) == 1


def test_begin_while_sent_answers_reconcile_never_dispatch(job, runner):
    _begin(runner, job)
    for _ in range(3):
        out = _begin(runner, job)
        assert out["decision"] == "reconcile" and out["reason"] == "in_flight"
    assert Operation.select().count() == 1
    assert tool_calls_used(Job.get()) == 1


@pytest.mark.parametrize("state, decision, reason", [
    (S.CONFIRMED, "reuse_receipt", None),
    (S.UNKNOWN, "reconcile", "outcome_unknown"),
    (S.FAILED, "dispatch", None),
    (S.NEEDS_REVIEW, "needs_review", "awaiting_editor"),
    (S.ABANDONED, "halt", "abandoned"),
])
def test_begin_on_seeded_state(job, runner, state, decision, reason):
    _seed(runner, job, state)
    out = _begin(runner, job)
    assert out["decision"] == decision
    assert out.get("reason") == reason
    if decision == "reuse_receipt":
        assert out["receipt"] == {"remote_id": "101", "link": "x"}
    if decision == "dispatch":
        assert out["operation"]["attempt"] == 2 and out["operation"]["state"] == S.SENT


def test_failed_retries_stop_at_the_attempt_budget(job, runner):
    key = _seed(runner, job, S.FAILED)
    for attempt in (2, 3):
        assert _begin(runner, job)["decision"] == "dispatch"
        ops.fail(runner, key, job, True, {"http_status": 400})
        assert Operation.get().attempt == attempt
    out = _begin(runner, job)
    assert (out["decision"], out["reason"]) == ("halt", "retry_budget_exhausted")


def test_non_retryable_failure_halts(job, runner):
    key = _begin(runner, job)["operation"]["operation_key"]
    ops.fail(runner, key, job, False, {"http_status": 400})
    out = _begin(runner, job)
    assert (out["decision"], out["reason"]) == ("halt", "failed_permanently")


def test_digest_mismatch_on_same_key(job, runner):
    _begin(runner, job)
    with pytest.raises(DigestMismatch) as exc:
        _begin(runner, job, payload={"title": "Other"})
    assert exc.value.http_status == 422
    assert exc.value.details["stored"] == request_digest(PAYLOAD)


def test_request_hash_instead_of_payload(job, runner):
    digest = request_digest(PAYLOAD)
    out = answer_dict(gate.begin(runner, "job-1", "create_draft", job, request_hash=digest))
    assert out["operation"]["request_hash"] == digest
    # The same request sent as a payload is the same operation.
    assert _begin(runner, job)["decision"] == "reconcile"


def test_explicit_operation_key(job, runner):
    out = _begin(runner, job, operation_key="custom:key:1", action="upload_media:hero")
    assert out["operation"]["operation_key"] == "custom:key:1"


def test_stale_token_after_takeover_never_writes(job, runner):
    _, newer = leases.acquire_lease("acme", "job-1", "w2", 60, takeover=True)
    assert newer.fencing_token == job + 1
    with pytest.raises(StaleFencingToken):
        _begin(runner, job)
    assert Operation.select().count() == 0
    key = _begin(runner, newer.fencing_token)["operation"]["operation_key"]
    with pytest.raises(StaleFencingToken):
        ops.confirm(runner, key, job, 5)
    with pytest.raises(StaleFencingToken):
        ops.fail(runner, key, job)
    with pytest.raises(StaleFencingToken):
        ops.mark_unknown(runner, key, job)
    assert Operation.get().state == S.SENT


def test_token_never_issued_is_refused(job, runner):
    with pytest.raises(ValidationFailed):
        _begin(runner, job + 5)


def test_begin_without_lease_is_refused(conn, runner):
    jobs.create_or_get_job("acme", "job-1")
    with pytest.raises(LeaseLost):
        _begin(runner, 1)


@pytest.mark.parametrize("state, transition", [
    (S.CONFIRMED, "fail"), (S.CONFIRMED, "unknown"), (S.FAILED, "confirm"), (S.FAILED, "unknown"),
    (S.UNKNOWN, "fail"), (S.NEEDS_REVIEW, "fail"), (S.NEEDS_REVIEW, "unknown"), (S.ABANDONED, "confirm"),
])
def test_illegal_transitions(job, runner, state, transition):
    key = _seed(runner, job, state)
    call = {"confirm": lambda: ops.confirm(runner, key, job, 999),
            "fail": lambda: ops.fail(runner, key, job, True, {}),
            "unknown": lambda: ops.mark_unknown(runner, key, job)}[transition]
    with pytest.raises(InvalidTransition):
        call()
    assert Operation.get().state == state


@pytest.mark.parametrize("state", [S.UNKNOWN, S.NEEDS_REVIEW])
def test_confirm_with_late_evidence_is_allowed(job, runner, state):
    key = _seed(runner, job, state)
    op = ops.confirm(runner, key, job, 77)
    assert op.state == S.CONFIRMED and op.remote_id == "77"


def test_confirm_is_idempotent_and_conflicts_on_other_remote_id(job, runner):
    key = _seed(runner, job, S.CONFIRMED)
    assert ops.confirm(runner, key, job, 101).state == S.CONFIRMED
    with pytest.raises(ReceiptConflict):
        ops.confirm(runner, key, job, 102)
    assert OperationEvent.select().where(OperationEvent.to_state == S.CONFIRMED).count() == 1


def test_confirm_requires_remote_id(job, runner):
    key = _begin(runner, job)["operation"]["operation_key"]
    with pytest.raises(ValidationFailed):
        ops.confirm(runner, key, job, "")


@pytest.mark.parametrize("status, kind, expected_state, job_status", [
    (201, None, S.CONFIRMED, "active"),
    (422, None, S.FAILED, "active"),
    (403, None, S.FAILED, "halted"),
    (None, "timeout", S.UNKNOWN, "active"),
    (502, None, S.UNKNOWN, "active"),
])
def test_record_outcome_classifies(job, runner, status, kind, expected_state, job_status):
    key = _begin(runner, job)["operation"]["operation_key"]
    _, op = ops.record_outcome(runner, key, job, http_status=status, error_kind=kind,
                               remote_id=5 if status == 201 else None)
    assert op.state == expected_state
    assert Job.get().status == job_status


def test_halted_job_dispatches_nothing(job, runner):
    key = _begin(runner, job)["operation"]["operation_key"]
    ops.record_outcome(runner, key, job, http_status=401)
    out = _begin(runner, job, action="set_seo", payload={"x": 1})
    assert (out["decision"], out["reason"]) == ("halt", "authorization_revoked")
    assert Operation.select().count() == 1


def test_requires_approval_halts_and_records_intent(job, runner):
    out = _begin(runner, job, action="publish", requires_approval=True, target="site:test")
    assert (out["decision"], out["reason"]) == ("halt", "approval_required")
    assert Operation.get().state == S.PREPARED
    # The same key for another target is refused, never dispatched under the stored row.
    with pytest.raises(Exception) as exc:
        _begin(runner, job, action="publish", requires_approval=True, target="site:other")
    assert exc.value.code == "target_mismatch"
    # A live approval bound to this version, action, digest and target lets it dispatch.
    from durable_ledger.approvals import rules as approvals

    approver = Principal("acme", "approver", "ed")
    approvals.grant(approver, "job-1", 1, "publish", request_digest(PAYLOAD), "site:test", "2999-01-01T00:00:00Z")
    out = _begin(runner, job, action="publish", requires_approval=True, target="site:test")
    assert out["decision"] == "dispatch" and Operation.get().state == S.SENT


def test_operations_are_tenant_scoped(job, runner):
    key = _begin(runner, job)["operation"]["operation_key"]
    other = Principal("other", "runner", "x")
    with pytest.raises(Exception) as exc:
        ops.confirm(other, key, job, 1)
    assert exc.value.http_status == 404


def test_version_bump_gives_new_default_keys(job, runner):
    _seed(runner, job, S.CONFIRMED)
    jobs.bump_version("acme", "job-1", job, runner.actor)
    out = _begin(runner, job, payload={"title": "v2"})
    assert out["decision"] == "dispatch"
    assert out["operation"]["operation_key"] == "acme:job-1:v2:create_draft"
