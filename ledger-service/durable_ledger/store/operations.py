"""Operation and operation-event statements the features call (the gate's hot path is in
`store/__init__.py` and the backends)."""

from peewee import JOIN

from ..kernel import states as S
from .db import write_txn
from .models import AuditLog, Job, Lease, Operation

# --- for gate/ and reconciliation/


def operation_for_dispatch_check(tenant, key):
    """The operation with ``job_key``, ``status``, ``halt_reason`` (its job's) and ``lease_token``
    (the job's current fencing token, None without a lease) as attributes, or None."""
    return (Operation.select(Operation, Job.job_id.alias("job_key"), Job.status, Job.halt_reason,
                             Lease.fencing_token.alias("lease_token"))
            .join(Job, on=(Job.id == Operation.job))
            .join(Lease, join_type=JOIN.LEFT_OUTER, on=(Lease.job == Job.id))
            .where(Operation.tenant == tenant, Operation.operation_key == key)
            .objects().first())


def job_for_approval_check(job_pk):
    """The job row by primary key (raises Job.DoesNotExist when there is none)."""
    return Job.get_by_id(job_pk)


def reread_operation(op_pk):
    """The operation row by primary key, as it is now (raises Operation.DoesNotExist)."""
    return Operation.get_by_id(op_pk)


def add_job_cost(job_pk, cost):
    """Adds ``cost`` to the job's cost in one UPDATE (no read-modify-write); returns rows updated."""
    return Job.update(cost=Job.cost + float(cost)).where(Job.id == job_pk).execute()


def halt_job_on_outcome(tenant, job_pk, actor, reason, detail, now):
    """An active job -> halted with ``reason``, audited as `job_halted` in the same transaction;
    returns rows updated (0: the job was not active, nothing is audited)."""
    with write_txn():
        n = (Job.update(status="halted", halt_reason=reason, updated_at=now)
             .where(Job.id == job_pk, Job.status == "active").execute())
        if n:
            AuditLog.create(tenant=tenant, job=job_pk, actor=actor, action="job_halted",
                            detail={"reason": reason, **(detail or {})}, created_at=now)
    return n


def claim_for_reconcile(op_pk, claim_s, now):
    """Takes the reconciler's claim on an in-flight operation until ``now + claim_s``: True if
    taken, False if it is not in flight or another run's claim has not expired."""
    return (Operation.update(reconciling_until=now + claim_s)
            .where(Operation.id == op_pk, Operation.state.in_(S.IN_FLIGHT),
                   Operation.reconciling_until.is_null() | (Operation.reconciling_until < now))
            .execute()) == 1


def release_reconcile_claim(op_pk):
    """Drops the reconciler's claim, whatever the state."""
    Operation.update(reconciling_until=None).where(Operation.id == op_pk).execute()


def record_reconcile_error(op_pk, evidence, now):
    """A reconciler run that could not ask: counts the attempt, drops the claim, stores
    ``evidence``; the state does not move."""
    Operation.update(reconcile_attempts=Operation.reconcile_attempts + 1, reconciling_until=None,
                     evidence=evidence, updated_at=now).where(Operation.id == op_pk).execute()


def apply_verdict_fields(op_pk, from_state, to_state, fields, now, attempt=None):
    """``from_state`` -> ``to_state`` with ``fields``, counting the reconcile attempt and dropping
    the claim, only if the operation is still in ``from_state`` (and ``attempt``, when given);
    returns rows updated (0: it moved meanwhile)."""
    fields = {**fields, "reconcile_attempts": Operation.reconcile_attempts + 1, "reconciling_until": None,
              "updated_at": now}
    where = (Operation.attempt == attempt,) if attempt is not None else ()
    return (Operation.update(state=to_state, **fields)
            .where(Operation.id == op_pk, Operation.state == from_state, *where).execute())


def set_kept_receipts(op_pk, evidence):
    """Replaces the operation's evidence (the receipts kept on it); nothing else changes."""
    Operation.update(evidence=evidence).where(Operation.id == op_pk).execute()


def stuck_operations(sent_older_than_s, job_idle_s, limit, now):
    """The sweeper's candidates, oldest update first, with their jobs joined: SENT for longer than
    ``sent_older_than_s``, UNKNOWN, or SENT in a job idle for longer than ``job_idle_s``."""
    stuck = (Operation.select(Operation, Job).join(Job)
             .where(((Operation.state == S.SENT) & (Operation.updated_at < now - sent_older_than_s))
                    | (Operation.state == S.UNKNOWN)
                    | ((Operation.state == S.SENT) & (Job.updated_at < now - job_idle_s)))
             .order_by(Operation.updated_at).limit(limit))
    return list(stuck)
