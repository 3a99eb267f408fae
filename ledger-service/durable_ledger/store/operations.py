"""Operation and operation-event statements the features call outside the gate's hot path (which
is in `store/__init__.py` and the backends)."""

from peewee import JOIN, fn

from ..kernel import states as S
from .db import write_txn
from .models import AuditLog, Job, Lease, Operation, OperationEvent

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


# --- for jobs/


def operations_of_job(job_pk, states=None):
    """The job's operations in id order (only those in ``states`` if given), as a list."""
    q = Operation.select().where(Operation.job == job_pk)
    if states:
        q = q.where(Operation.state.in_(states))
    return list(q.order_by(Operation.id))


def job_has_confirmed_operation(job_pk, task_version, action_suffix):
    """True if the job has a CONFIRMED operation of ``task_version`` whose action is
    ``action_suffix`` or ends with ``.action_suffix``."""
    return (Operation.select(Operation.id)
            .where(Operation.job == job_pk, Operation.task_version == task_version,
                   Operation.state == S.CONFIRMED,
                   (Operation.action == action_suffix) | (Operation.action.endswith("." + action_suffix)))
            .exists())


def operation_events_of_job(job_pk):
    """Every operation event of the job in id order (a query: evaluated when iterated)."""
    return OperationEvent.select().where(OperationEvent.job == job_pk).order_by(OperationEvent.id)


def operation_state_counts_of_jobs(job_pks):
    """(job pk, state, count) for the operations of the jobs ``job_pks``."""
    return (Operation.select(Operation.job, Operation.state, fn.COUNT(Operation.id))
            .where(Operation.job.in_(job_pks))
            .group_by(Operation.job, Operation.state).tuples())


def jobs_with_operations_awaiting_approval(job_pks):
    """The jobs among ``job_pks`` with a PREPARED operation that requires an approval."""
    return {r[0] for r in Operation.select(Operation.job).where(
        Operation.job.in_(job_pks), Operation.state == S.PREPARED,
        Operation.requires_approval == True).tuples()}  # noqa: E712


def tenant_operations_confirmed_twice(tenant):
    """How many of the tenant's operations have more than one move into CONFIRMED."""
    confirms = (OperationEvent.select(OperationEvent.operation, fn.COUNT(OperationEvent.id).alias("n"))
                .join(Operation).where(Operation.tenant == tenant, OperationEvent.to_state == S.CONFIRMED)
                .group_by(OperationEvent.operation))
    return sum(1 for row in confirms if row.n > 1)


def tenant_duplicate_remote_ids(tenant):
    """Rows (action, remote_id, n) of the tenant's CONFIRMED operations sharing an action and a
    remote id (n > 1), as a query."""
    return (Operation.select(Operation.action, Operation.remote_id, fn.COUNT(Operation.id).alias("n"))
            .where(Operation.tenant == tenant, Operation.state == S.CONFIRMED)
            .group_by(Operation.action, Operation.remote_id).having(fn.COUNT(Operation.id) > 1))


def count_tenant_operations_in_states(tenant, states):
    """How many of the tenant's operations are in one of ``states``."""
    return Operation.select().where(Operation.tenant == tenant, Operation.state.in_(states)).count()


def prunable_operation_ids(cutoff, limit):
    """Up to ``limit`` ids of terminal operations (CONFIRMED, ABANDONED, FAILED not retryable)
    last updated before ``cutoff``."""
    terminal = ((Operation.state.in_([S.CONFIRMED, S.ABANDONED]))
                | ((Operation.state == S.FAILED) & (Operation.retryable == False)))  # noqa: E712
    return [o.id for o in Operation.select(Operation.id).where(terminal, Operation.updated_at < cutoff).limit(limit)]


def delete_operations_with_events(op_pks):
    """Delete the operations ``op_pks`` and their events in one write transaction:
    (events deleted, operations deleted)."""
    with write_txn():
        events = OperationEvent.delete().where(OperationEvent.operation.in_(op_pks)).execute()
        ops = Operation.delete().where(Operation.id.in_(op_pks)).execute()
    return events, ops
