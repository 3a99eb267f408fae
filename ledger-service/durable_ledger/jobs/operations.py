"""Reading a tenant's operations: one by its key (404 when there is none), its events, a job's list."""

from .. import store
from ..kernel.errors import OperationNotFound
from ..store.operations import operations_of_job
from .jobs import get_job_and_lease


def get_operation(tenant, key):
    op = store.get_operation(tenant, key)
    if op is None:
        raise OperationNotFound(f"no operation '{key}'", {"operation_key": key})
    return op


def operation_events(op):
    return store.operation_events(op.id)


def operations_in(job, states):
    """The operations of a job already read, in ``states`` (no second read of the job)."""
    return operations_of_job(job.id, states)


def list_job_operations(tenant, job_id, states=None):
    job, _ = get_job_and_lease(tenant, job_id)
    return job, operations_of_job(job.id, states)
