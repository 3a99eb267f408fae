"""Queries on operation and operation_event rows outside the gate's hot path."""

from peewee import fn

from ..kernel import states as S
from .db import write_txn
from .models import Operation, OperationEvent

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
