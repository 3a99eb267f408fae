"""Cancellation and re-authorisation: the job-level stop conditions.

Cancel works in layers, so that stopping never creates the duplicates it is meant to avoid:
1. refuse new input: the job is `cancelled`, `begin` answers halt for every operation;
2. in-flight operations (SENT/UNKNOWN) are left to reconciliation, not failed: their remote
   effect may exist, and the report must say so;
3. the lease is released (expired now, the token high-water mark kept so a paused worker's
   late write is still refused);
4. nothing already created is deleted: the report lists drafts and media that exist.
A cancelled job is never reopened: resume and reauthorize refuse it.
"""

import time

from ..kernel import states as S
from ..kernel.errors import InvalidTransition
from ..store import jobs as job_rows
from ..store.audit import audit
from ..store.db import write_txn
from ..store.operations import operations_of_job
from .jobs import get_job
from .serialize import operation_dict


def cancel_job(principal, job_id, reason=None):
    job = get_job(principal.tenant, job_id)
    now = time.time()
    # Two transactions, never one holding the job row and the lease row at once: a claim holds
    # both FOR SHARE (store/postgres.py, the claim statement) in whatever order the planner picks, so a cancel that
    # locked the job and then waited for the lease could deadlock with it. Between the two, the
    # lease is still live but the job is cancelled: every claim is refused already.
    with write_txn():
        n = job_rows.mark_job_cancelled(job.id, now)
        if n:
            audit(principal.tenant, job.id, principal.actor, "job_cancelled", {"reason": reason})
    with write_txn():
        job_rows.expire_live_lease(job.id, now)
    ops = operations_of_job(job.id)
    return {
        "job_id": job_id,
        "status": "cancelled",
        "already_cancelled": n == 0,
        "in_flight_left_to_reconcile": [operation_dict(o, job_id) for o in ops if o.state in S.NEEDS_ATTENTION],
        "created_remote_objects_kept": [{"operation_key": o.operation_key, "action": o.action, "remote_id": o.remote_id}
                                        for o in ops if o.state == S.CONFIRMED],
        "lease_released": True,
    }


def reauthorize(principal, job_id, policy_hash=None, note=None):
    """Lift an authorization_revoked / policy_changed halt (approver or admin)."""
    job = get_job(principal.tenant, job_id)
    if job.status == "cancelled":
        raise InvalidTransition("a cancelled job is never reopened", {"status": job.status})
    if job.status != "halted":
        raise InvalidTransition(f"job is {job.status}, not halted", {"status": job.status})
    job_rows.reactivate_halted_job(job.id, time.time(), policy_hash)
    audit(principal.tenant, job.id, principal.actor, "job_reauthorized",
          {"previous_reason": job.halt_reason, "policy_hash": policy_hash, "note": note})
    return job_rows.job_by_pk(job.id)
