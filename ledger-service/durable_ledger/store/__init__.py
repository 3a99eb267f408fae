"""The storage layer: every SQL statement and every SQLite/PostgreSQL difference is in here.

The features call the functions below (the gate's statements and the operation transitions) and
one module per aggregate for the rest: jobs.py (jobs, leases, checkpoints), operations.py,
approvals.py, waits.py, reviews.py, sessions.py (Agents API session control), artifacts.py,
tokens.py, console_sessions.py, audit.py. Nothing outside the store imports peewee or the
tables, or asks which database it runs on (tests/test_layers.py). The gate's statements have
one implementation per backend (`sqlite.py`, `postgres.py`) with the same names, chosen once
when the database is bound; everything portable is written once. The contract suite
(tests/test_store.py, and every test through the `client` fixture) runs on both.
"""

import time
from dataclasses import replace

from peewee import fn

from ..kernel.errors import InvalidTransition
from ..kernel.fencing import check_fence
from . import postgres, sqlite
from .db import db, is_sqlite, on_bind, write_txn
from .models import AuditLog, Job, Lease, Operation, OperationEvent, Setting
from .rows import ClaimTemplate, JobGuard, NewOp, dispatcher, json_codec
from .wait_models import ApprovalDelivery

__all__ = ["ClaimTemplate", "JobGuard", "NewOp", "write_txn", "load_gate", "claim_new", "claim_retry", "insert_prepared",
           "confirm", "transition", "lease_of", "operation_locked", "get_operation", "operation_events",
           "add_event", "count_dispatches", "ping", "counts", "setting", "begin_many", "confirm_many"]


# The backend's statements, chosen once when the database is bound (`init_database`), not asked
# again on every call.
_impl = None


def _choose_backend(_database):
    global _impl
    _impl = sqlite if is_sqlite() else postgres


on_bind(_choose_backend)


def _backend():
    return _impl


def load_gate(tenant, job_id, operation_key, action, default_key, claim=None):
    """(job, lease or None, operation or None, key, claimed operation or None); all None if
    there is no such job. ``default_key(task_version)`` names the operation when the caller did
    not (PostgreSQL computes the same key in SQL: tests/test_store.py holds them equal). With ``claim`` (a `ClaimTemplate`) PostgreSQL also claims a new operation in the same
    statement when nothing stands in the way (store/postgres.py `_BEGIN`); SQLite, in process,
    only loads (the gate then claims with `claim_new`)."""
    if _impl is sqlite:
        return sqlite.load_gate(tenant, job_id, operation_key, default_key) + (None,)
    return postgres.load_gate(tenant, job_id, operation_key, action, claim)


def claim_new(new: NewOp, may_dispatch, counted, detail):
    """The claim of a new operation as SENT, atomic with its checks: see the backends. The row
    records the n8n execution its SENT event is stamped with (``dispatched_by``)."""
    new = replace(new, dispatched_by=dispatcher(detail))
    return _backend().claim_new(new, may_dispatch, json_codec.db_value(detail), counted)


def insert_prepared(new: NewOp, detail):
    """The PREPARED row of a step waiting for an approval: inserted, or the one already there."""
    op = _backend().insert_prepared(new, json_codec.db_value(detail))
    return op or Operation.get(Operation.tenant == new.tenant, Operation.operation_key == new.key)


def claim_retry(op, token, actor, now, may_dispatch, counted, detail):
    """PREPARED/FAILED -> SENT with attempt+1, conditional on the state and attempt we read.

    The operation, a refusal (``may_dispatch`` on the job row locked as in `claim_new`), or None
    when the row moved first. Raises when the token is not current."""
    backend = _backend()
    with write_txn():
        refused = may_dispatch(backend.guard(op.job_id, counted))
        if refused:
            return refused
        check_fence(backend.lease_locked(op.job_id), token)
        attempt = op.attempt + (1 if op.state == "FAILED" else 0)
        n = (Operation.update(state="SENT", attempt=attempt, fencing_token=token, updated_at=now,
                              dispatched_by=dispatcher(detail))
             .where(Operation.id == op.id, Operation.state == op.state, Operation.attempt == op.attempt)
             .execute())
        if n != 1:
            return None
        add_event(op.id, op.job_id, op.state, "SENT", actor, token, {**detail, "attempt": attempt}, now)
    return Operation.get_by_id(op.id)


def confirm(tenant, key, token, remote_id, receipt, actor, detail, execution_id=None):
    """The hot confirm: SENT/UNKNOWN/NEEDS_REVIEW -> CONFIRMED if the token is current and the
    caller's n8n execution (``execution_id``, None for callers without one) is not another than
    the one that dispatched the attempt, in one statement where the backend can; None means
    "take the general path" (`transition`, reconciliation/attempts.py)."""
    now = time.time()
    return _backend().confirm(tenant, key, token, str(remote_id), json_codec.db_value(receipt or {}),
                              json_codec.db_value(detail), actor, now, execution_id)


def transition(op, token, to_state, fields, actor, detail, now, before=None, fenced=True):
    """Move ``op`` from the state it was read in to ``to_state`` if ``token`` is current.

    Every transition is a conditional UPDATE whose WHERE names the state it leaves, inside a
    write transaction that first re-reads the job's lease (FOR SHARE on PostgreSQL, the
    database-wide IMMEDIATE lock on SQLite). The window this closes:

        worker A: check token 4 ok ..................... UPDATE op (token 4)
        worker B:                 take over, token 5 ... begin: sees A's row, reconciles

    With the lock the takeover's UPDATE of the lease waits for A's transaction.
    ``before`` runs first inside the transaction (an extra check that must see the same lock).
    ``fenced=False``: the attempt's own answer after a takeover (reconciliation/attempts.py
    `settle_own`); the state and attempt conditions below still hold it to the attempt it read.
    """
    with write_txn():
        if before is not None:
            before()
        lease = _backend().lease_locked(op.job_id)
        if fenced:
            check_fence(lease, token)
        # The attempt too: SENT (attempt 1) can become SENT (attempt 2) between our read and
        # this write (reconciled absent, claimed again), and an outcome is for the attempt we read.
        n = (Operation.update(state=to_state, updated_at=now, **fields)
             .where(Operation.id == op.id, Operation.state == op.state, Operation.attempt == op.attempt).execute())
        if n != 1:
            current = Operation.get_by_id(op.id)
            raise InvalidTransition(f"operation moved to {current.state} concurrently",
                                    {"state": current.state, "wanted": to_state})
        add_event(op.id, op.job_id, op.state, to_state, actor, token, detail, now)


def lease_of(job_pk, lock=False):
    """The job's lease row, or None; ``lock`` inside a write transaction (FOR SHARE on PostgreSQL)."""
    return _backend().lease_locked(job_pk) if lock else Lease.get_or_none(Lease.job == job_pk)


def operation_locked(op_pk):
    """The operation row, locked for update inside the caller's write transaction."""
    return _backend().operation_locked(op_pk)


def get_operation(tenant, key):
    """The operation with its job joined in, or None."""
    return (Operation.select(Operation, Job).join(Job)
            .where(Operation.tenant == tenant, Operation.operation_key == key).get_or_none())


def operation_events(op_pk):
    return list(OperationEvent.select().where(OperationEvent.operation == op_pk).order_by(OperationEvent.id))


def add_event(op_pk, job_pk, from_state, to_state, actor, token, detail, now):
    OperationEvent.create(operation=op_pk, job=job_pk, from_state=from_state, to_state=to_state, actor=actor,
                          fencing_token=token, detail=detail, created_at=now)


def count_dispatches(job_pk):
    """Dispatches so far (every move into SENT), counted from the event log: a counter on the job
    row would make every dispatch update one row, serialising concurrent begins of one job."""
    return OperationEvent.select().where(OperationEvent.job == job_pk, OperationEvent.to_state == "SENT").count()


def ping():
    """One round trip to the database (the health check)."""
    db.execute_sql("SELECT 1").fetchone()


def counts(refusal_prefix):
    """Gauges for /metrics: operations by state, jobs by status, refusals by tenant and code
    (audit actions starting with ``refusal_prefix``), approval resume deliveries by state."""
    def grouped(model, *cols):
        return list(model.select(*cols, fn.COUNT(model.id)).group_by(*cols).tuples())

    refusals = (AuditLog.select(AuditLog.tenant, AuditLog.action, fn.COUNT(AuditLog.id))
                .where(AuditLog.action.startswith(refusal_prefix))
                .group_by(AuditLog.tenant, AuditLog.action).tuples())
    return {"operations": grouped(Operation, Operation.state), "jobs": grouped(Job, Job.status),
            "refusals": [(t, a[len(refusal_prefix):], n) for t, a, n in refusals],
            "deliveries": grouped(ApprovalDelivery, ApprovalDelivery.state)}


def begin_many(tenant, claims, actor, now, detail, default_max_attempts):
    """Claim many new operations at once where the backend can: {ord: operation} for those
    claimed; the rest are for the single-item gate. SQLite, in process, claims none here."""
    if _impl is sqlite or not claims:
        return {}
    return postgres.begin_many(tenant, claims, actor, now, detail, default_max_attempts)


def confirm_many(tenant, items, actor, detail):
    """Confirm many operations at once where the backend can: {ord: operation} for those
    confirmed; the rest are for the single-item path (`confirm`, `transition`)."""
    if _impl is sqlite or not items:
        return {}
    return postgres.confirm_many(tenant, items, actor, time.time(), detail)


def setting(key, value):
    """The service-wide value stored under ``key``; ``value`` is stored first if there is none
    (the first of several workers to ask wins, and every worker gets that one)."""
    Setting.insert(key=key, value=value).on_conflict_ignore().execute()
    return Setting.get_by_id(key).value
