"""The editors' review queue: its reads and the review decision's write."""

from .models import Job, Operation


def review_queue_operations(tenant, states, job_id=None, limit=200):
    """The tenant's operations in ``states`` (of job ``job_id`` only, when given), with ``job.job_id``
    loaded, by job id then oldest update first, at most ``limit``."""
    q = (Operation.select(Operation, Job.job_id).join(Job)
         .where(Operation.tenant == tenant, Operation.state.in_(states)))
    if job_id:
        q = q.where(Job.job_id == job_id)
    return list(q.order_by(Job.job_id, Operation.updated_at).limit(limit))


def apply_review_decision(op_pk, from_state, fields, now):
    """The editor's decision: ``fields`` (the new state among them) written only if the operation
    is still in ``from_state``; returns rows updated (0: it changed while the editor decided)."""
    return (Operation.update(updated_at=now, **fields)
            .where(Operation.id == op_pk, Operation.state == from_state).execute())
