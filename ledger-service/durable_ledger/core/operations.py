"""The side-effect ledger: the gate (`begin`) and the outcome transitions.

Every transition is a conditional UPDATE whose WHERE names the state it leaves and whose row
count is checked, inside a write transaction that first re-reads the job's lease (FOR SHARE
on PostgreSQL, the database-wide IMMEDIATE lock on SQLite). The window this closes:

    worker A: check token 4 ok ..................... INSERT op SENT (token 4)
    worker B:                 take over, token 5, begin -> sees nothing -> INSERT op SENT

Without the lock both could dispatch. With it, the takeover's UPDATE of the lease waits for
A's transaction, so B's begin sees A's SENT row and is told to reconcile instead.
"""

import time

from ..db import is_sqlite, write_txn
from ..errors import (
    DigestMismatch,
    JobNotFound,
    InvalidTransition,
    OperationNotFound,
    ReceiptConflict,
    GateContended,
    ValidationFailed,
)
from ..models import AuditLog, Job, Lease, Operation, OperationEvent
from . import approvals, budgets, fastpath, n8n_context, reconciliation
from . import states as S
from .audit import record_refusal
from .digest import default_operation_key, request_digest
from .jobs import get_job_and_lease  # noqa: F401 - re-exported for callers of this module
from .leases import check_fence
from .render import iso, operation_dict
from .secrets import redact

_MISSING = object()


def _locked_lease(job_pk):
    q = Lease.select().where(Lease.job == job_pk)
    if not is_sqlite():
        q = q.for_update("FOR SHARE")
    return q.get_or_none()


def _event(op, job_pk, from_state, to_state, actor, token, detail=None, now=None):
    OperationEvent.create(operation=op.id, job=job_pk, from_state=from_state, to_state=to_state,
                          actor=actor, fencing_token=token, detail=n8n_context.stamp(detail),
                          created_at=now or time.time())


def _result(decision, op, job_id, reason=None, **extra):
    if decision == S.RECONCILE and reason is None:
        reason = "outcome_unknown"
    out = {"decision": decision, "operation": operation_dict(op, job_id)}
    if decision == S.REUSE_RECEIPT:
        out["receipt"] = redact({"remote_id": op.remote_id, **(op.receipt or {})})
    if reason:
        out["reason"] = reason
        out["message"] = S.MESSAGES.get(reason, reason)
    out.update(extra)
    return out


def _max_attempts(job, default):
    return int((job.budgets or {}).get("max_attempts") or default)


def _check_digest(op, digest):
    if op.request_hash != digest:
        raise DigestMismatch(
            "this operation key was first used with another request; "
            "use a new key (or bump the task version) for a different request",
            {"operation_key": op.operation_key, "stored": op.request_hash, "given": digest},
        )


# How often `begin` re-reads after losing a race (a concurrent claim or retry moved the row
# between our read and our conditional write). Each loss means someone else made progress, so
# a few rounds always settle; unbounded recursion would turn a livelock into a stack overflow.
_BEGIN_ROUNDS = 4


def begin(principal, job_id, action, fencing_token, payload=_MISSING, request_hash=None,
          operation_key=None, target=None, requires_approval=False, default_max_attempts=3,
          backoff_base_s=0.0, reconcile=True, reconcile_claim_s=60.0):
    """The gate. Returns a decision dict; persists SENT before answering ``dispatch``."""
    if payload is _MISSING and not request_hash:
        raise ValidationFailed("send 'payload' (digested by the ledger) or 'request_hash'", {"field": "payload"})
    digest = request_digest(payload) if payload is not _MISSING else request_hash
    if request_hash and request_hash != digest:
        # The digest is what approvals and the publishing proxy bind to: if the client's word
        # won over the payload it sent, an approval for payload A would release payload B.
        raise DigestMismatch("request_hash is not the digest of the payload sent; send one of them, or both agreeing",
                             {"field": "request_hash", "given": request_hash, "computed": digest})
    for _ in range(_BEGIN_ROUNDS):
        out = _begin_round(principal, job_id, action, fencing_token, payload, digest, operation_key, target,
                           requires_approval, default_max_attempts, backoff_base_s, reconcile, reconcile_claim_s)
        if out is not _LOST_RACE:
            return out
    raise GateContended("the operation kept changing while the gate decided; send the same begin again",
                        {"job_id": job_id, "action": action})


_LOST_RACE = object()


def _refused(principal, job, job_id, key, op, refusal):
    """The halt answer for a job that may not dispatch (cancelled, halted, budget used up)."""
    tenant, actor = principal.tenant, principal.actor
    if refusal.budget:
        record_refusal(tenant, job.id, actor, "budget_exhausted", {"budget": refusal.budget, "operation_key": key})
        return {"decision": S.HALT, "operation": operation_dict(op, job_id) if op else None,
                "reason": "budget_exhausted", "budget": refusal.budget,
                "message": f"the job's {refusal.budget} budget is used up; nothing is dispatched"}
    status = "cancelled" if refusal.reason == "cancelled" else "halted"
    record_refusal(tenant, job.id, actor, "job_" + status, {"operation_key": key, "reason": refusal.reason})
    if op is None:
        return {"decision": S.HALT, "operation": None, "reason": refusal.reason,
                "message": S.MESSAGES.get(refusal.reason, f"job is {status}")}
    return _result(S.HALT, op, job_id, refusal.reason)


def _begin_round(principal, job_id, action, fencing_token, payload, digest, operation_key, target,
                 requires_approval, default_max_attempts, backoff_base_s, reconcile, reconcile_claim_s):
    tenant, actor = principal.tenant, principal.actor
    job, lease, op = fastpath.load(tenant, job_id, operation_key, action)
    if job is None:
        raise JobNotFound(f"no job '{job_id}' in tenant '{tenant}'", {"job_id": job_id})
    check_fence(lease, fencing_token)
    key = operation_key or default_operation_key(tenant, job_id, job.task_version, action)
    max_attempts = _max_attempts(job, default_max_attempts)

    if op is not None:
        _check_digest(op, digest)
        if op.job_id != job.id:
            raise ValidationFailed("operation key belongs to another job", {"operation_key": key})

    # The checks below, before any write, answer the common refusals cheaply; the claims
    # (`fastpath.claim_new`, `_claim_retry`) check status and budgets again in their own
    # transaction, which is what makes them hold under concurrency.
    if job.status in ("cancelled", "halted"):
        return _refused(principal, job, job_id, key, op, fastpath.Refused(job.halt_reason or job.status))

    would_dispatch = op is None or op.state in (S.PREPARED, S.FAILED)
    if would_dispatch:
        budget = budgets.exhausted(job)
        if budget:
            return _refused(principal, job, job_id, key, op, fastpath.Refused("budget_exhausted", budget))
        reconciled_absent = op is not None and (op.last_error or {}).get("reconciled")
        if op is not None and op.state == S.FAILED and op.retryable and op.attempt < op.max_attempts \
                and not reconciled_absent:
            wait = budgets.backoff_remaining(op.attempt, op.updated_at, backoff_base_s)
            if wait > 0:
                return _result(S.HALT, op, job_id, "backoff", retry_after=wait)
        if approvals.needs_approval(job, action, requires_approval):
            if approvals.check_and_use(principal, job, action, digest, target) is None:
                denial = approvals.active_denial(op, digest) if op is not None else None
                if denial is not None:
                    record_refusal(tenant, job.id, actor, "approval_denied", {"operation_key": key, "target": target})
                    return _result(S.HALT, op, job_id, "approval_denied",
                                   denial={"reason": denial.reason, "denied_by": denial.denied_by,
                                           "at": iso(denial.created_at)})
                record_refusal(tenant, job.id, actor, "approval_required", {"operation_key": key, "target": target})
                op = op or _prepare(tenant, job, key, action, digest, fencing_token, target, max_attempts, actor,
                                    _summary(payload) if payload is not _MISSING else None)
                return _result(S.HALT, op, job_id, "approval_required")
            requires_approval = True

    now = time.time()
    if op is None:
        claimed = _claim_new(tenant, job, key, action, digest, fencing_token, target,
                             requires_approval, max_attempts, actor, payload, now)
        if isinstance(claimed, fastpath.Refused):
            return _refused(principal, job, job_id, key, None, claimed)
        if claimed is not None:
            return _result(S.DISPATCH, claimed, job_id)
        op = Operation.get_or_none(Operation.tenant == tenant, Operation.operation_key == key)
        if op is None:
            return _LOST_RACE  # not claimed, no row: the job was reopened between claim and re-read
        _check_digest(op, digest)

    decision, reason = S.decide_existing(op.state, op.retryable, op.attempt, op.max_attempts)
    extra = {}
    if decision == S.RECONCILE and reconcile:
        outcome, verdict, op = reconciliation.reconcile_operation(op, actor, reconcile_claim_s, escalate=False)
        if outcome == reconciliation.NO_RECONCILER:
            return _result(S.RECONCILE, op, job_id, reason, reconciliation={"outcome": outcome})
        extra = {"reconciliation": {"outcome": outcome, "verdict": verdict, "evidence": redact(op.evidence)}}
        if outcome in (reconciliation.BUSY, reconciliation.ERROR):
            reason = "reconcile_in_progress" if outcome == reconciliation.BUSY else "reconcile_failed"
            return _result(S.RECONCILE, op, job_id, reason, **extra)
        decision, reason = S.decide_existing(op.state, op.retryable, op.attempt, op.max_attempts)
    if decision == S.DISPATCH:
        resent = _claim_retry(op, job, fencing_token, actor, now)
        if isinstance(resent, fastpath.Refused):
            refused = _refused(principal, job, job_id, key, op, resent)
            refused.update(extra)
            return refused
        if resent is None:  # someone else moved it first; answer from what they left
            return _LOST_RACE
        return _result(S.DISPATCH, resent, job_id, **extra)
    if decision == S.REUSE_RECEIPT:
        _note_reuse(principal, job, op, fencing_token)
    return _result(decision, op, job_id, reason, **extra)


def _note_reuse(principal, job, op, token):
    """Evidence for the job timeline that a run was answered from the receipt instead of repeating
    the side effect. Best effort (like refusals): the answer matters more than its record."""
    try:
        AuditLog.create(tenant=principal.tenant, job=job.id, actor=principal.actor, action="receipt_reused",
                        detail={"operation_key": op.operation_key, "remote_id": op.remote_id, "fencing_token": token},
                        created_at=time.time())
    except Exception:  # noqa: BLE001
        pass


def _summary(payload):
    """A short, secret-free view of the request for editors (titles, sizes), never the body."""
    if not isinstance(payload, dict):
        return None
    out = {}
    for k, v in payload.items():
        if isinstance(v, str):
            # Titles stay whole: degraded-mode reconciliation matches on them exactly.
            limit = 500 if k == "title" else 120
            out[k] = v if len(v) <= limit else v[:limit - 3] + "..."
        elif isinstance(v, (int, float, bool)) or v is None:
            out[k] = v
        else:
            out[k] = f"<{type(v).__name__} of {len(v)}>" if hasattr(v, "__len__") else type(v).__name__
        if len(out) >= 12:
            break
    return redact(out)


def _insert_op(tenant, job, key, action, digest, token, target, max_attempts, state, requires_approval,
               summary, now):
    q = Operation.insert(
        tenant=tenant, operation_key=key, job=job.id, task_version=job.task_version, action=action,
        request_hash=digest, state=state, attempt=1, max_attempts=max_attempts, fencing_token=token,
        target=target, requires_approval=requires_approval, request_summary=summary,
        created_at=now, updated_at=now,
    ).on_conflict_ignore()
    if is_sqlite():
        # The IMMEDIATE transaction holds SQLite's write lock, so nobody can insert this key
        # between our check and our insert; and INSERT OR IGNORE's lastrowid is not reliable.
        if Operation.select(Operation.id).where(Operation.tenant == tenant,
                                                Operation.operation_key == key).exists():
            return None
        return Operation.get_by_id(q.execute())
    # PostgreSQL: ON CONFLICT DO NOTHING RETURNING id yields no row when another claim won.
    new_id = q.execute()
    return Operation.get_by_id(new_id) if new_id else None


def _prepare(tenant, job, key, action, digest, token, target, max_attempts, actor, summary=None):
    """The waiting step, with its request summary: the approvals page shows what it would send."""
    now = time.time()
    with write_txn():
        op = _insert_op(tenant, job, key, action, digest, token, target, max_attempts, S.PREPARED, True, summary,
                        now)
        if op is not None:
            _event(op, job.id, None, S.PREPARED, actor, token, {"reason": "approval_required"}, now)
    return op or Operation.get(Operation.tenant == tenant, Operation.operation_key == key)


def _claim_new(tenant, job, key, action, digest, token, target, requires_approval, max_attempts, actor,
               payload, now):
    summary = _summary(payload) if payload is not _MISSING else None
    op = fastpath.claim_new(tenant, job, key, action, digest, token, target, requires_approval, max_attempts,
                            actor, summary, now)
    if op is None:
        # Lost the key to a concurrent claim, or the token stopped being current between
        # our read and our write: the latter must surface as 409, not as a silent no-op.
        check_fence(Lease.get_or_none(Lease.job == job.id), token)
    return op


def _claim_retry(op, job, token, actor, now):
    """PREPARED/FAILED -> SENT with attempt+1, conditional on the state and attempt we read.

    Returns the operation, a `fastpath.Refused` (job stopped or budget used up, checked under the
    job row's lock as in `fastpath.claim_new`), or None when the row moved first."""
    with write_txn():
        refused = fastpath.guard_txn(job.id, now, exclusive=budgets.counted(job.budgets))
        if refused:
            return refused
        check_fence(_locked_lease(job.id), token)
        attempt = op.attempt + (1 if op.state == S.FAILED else 0)
        n = (Operation.update(state=S.SENT, attempt=attempt, fencing_token=token, updated_at=now)
             .where(Operation.id == op.id, Operation.state == op.state, Operation.attempt == op.attempt)
             .execute())
        if n != 1:
            return None
        _event(op, job.id, op.state, S.SENT, actor, token, {"attempt": attempt}, now)
    return Operation.get_by_id(op.id)


def get_operation(tenant, key):
    op = (Operation.select(Operation, Job).join(Job)
          .where(Operation.tenant == tenant, Operation.operation_key == key).get_or_none())
    if op is None:
        raise OperationNotFound(f"no operation '{key}'", {"operation_key": key})
    return op


def operation_events(op):
    return list(OperationEvent.select().where(OperationEvent.operation == op.id).order_by(OperationEvent.id))


def _transition(principal, key, token, to_state, allowed_from, fields, detail=None):
    """Move ``key`` to ``to_state`` from one of ``allowed_from`` if ``token`` is current."""
    op = get_operation(principal.tenant, key)
    if op.state not in allowed_from:
        raise InvalidTransition(
            f"operation is {op.state}; cannot move it to {to_state}",
            {"state": op.state, "wanted": to_state, "allowed_from": list(allowed_from)},
        )
    now = time.time()
    with write_txn():
        check_fence(_locked_lease(op.job_id), token)
        n = (Operation.update(state=to_state, updated_at=now, **fields)
             .where(Operation.id == op.id, Operation.state == op.state).execute())
        if n != 1:
            current = Operation.get_by_id(op.id)
            raise InvalidTransition(f"operation moved to {current.state} concurrently",
                                    {"state": current.state, "wanted": to_state})
        _event(op, op.job_id, op.state, to_state, principal.actor, token, detail, now)
    return get_operation(principal.tenant, key)


def confirm(principal, key, fencing_token, remote_id, receipt=None, cost=None):
    if not cost and remote_id not in (None, ""):
        fast = fastpath.confirm(principal.tenant, key, fencing_token, remote_id, receipt, principal.actor)
        if fast is not None:
            return fast
    op = get_operation(principal.tenant, key)
    if op.state == S.CONFIRMED:
        if str(op.remote_id) == str(remote_id):
            return op  # a retried confirm: same evidence, nothing to do
        raise ReceiptConflict(
            f"operation is already confirmed with remote id {op.remote_id}",
            {"stored_remote_id": op.remote_id, "given_remote_id": remote_id},
        )
    if remote_id in (None, ""):
        raise ValidationFailed("remote_id is required to confirm", {"field": "remote_id"})
    op = _transition(principal, key, fencing_token, S.CONFIRMED, S.ALLOWED["confirm"],
                     {"remote_id": str(remote_id), "receipt": receipt or {}, "last_error": None},
                     {"remote_id": str(remote_id), "cost": cost})
    if cost:
        Job.update(cost=Job.cost + float(cost)).where(Job.id == op.job_id).execute()
    return op


def fail(principal, key, fencing_token, retryable=True, error=None, halt_reason=None):
    op = get_operation(principal.tenant, key)
    if op.state == S.FAILED and op.fencing_token == fencing_token:
        return op
    op = _transition(principal, key, fencing_token, S.FAILED, S.ALLOWED["fail"],
                     {"retryable": bool(retryable), "last_error": error or {}},
                     {"retryable": bool(retryable), "error": error})
    if halt_reason:
        halt_job(principal, op.job_id, halt_reason, {"operation_key": key, "error": error})
    return op


def mark_unknown(principal, key, fencing_token, error=None):
    op = get_operation(principal.tenant, key)
    if op.state == S.UNKNOWN:
        return op
    return _transition(principal, key, fencing_token, S.UNKNOWN, S.ALLOWED["unknown"],
                       {"last_error": error or {}}, {"error": error})


def record_outcome(principal, key, fencing_token, http_status=None, error_kind=None, remote_id=None,
                   receipt=None, error=None, cost=None):
    """Classify a raw result (DESIGN.md) and apply it. Returns (classification, operation)."""
    kind = S.classify_outcome(http_status, error_kind, remote_id)
    err = dict(error or {})
    err.setdefault("http_status", http_status)
    if error_kind:
        err.setdefault("kind", error_kind)
    if kind == "confirm":
        return kind, confirm(principal, key, fencing_token, remote_id, receipt, cost)
    if kind == "fail":
        return kind, fail(principal, key, fencing_token, True, err)
    if kind == "fail_halt":
        return kind, fail(principal, key, fencing_token, False, err, halt_reason="authorization_revoked")
    return kind, mark_unknown(principal, key, fencing_token, err)


def halt_job(principal, job_pk, reason, detail=None):
    now = time.time()
    with write_txn():
        n = (Job.update(status="halted", halt_reason=reason, updated_at=now)
             .where(Job.id == job_pk, Job.status == "active").execute())
        if n:
            AuditLog.create(tenant=principal.tenant, job=job_pk, actor=principal.actor, action="job_halted",
                            detail={"reason": reason, **(detail or {})}, created_at=now)


def list_job_operations(tenant, job_id, states=None):
    job, _ = get_job_and_lease(tenant, job_id)
    q = Operation.select().where(Operation.job == job.id)
    if states:
        q = q.where(Operation.state.in_(states))
    return job, list(q.order_by(Operation.id))
