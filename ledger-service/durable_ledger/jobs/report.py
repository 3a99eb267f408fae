"""The job report and the tenant's acceptance counters.

A run's end is not a "done" flag: the report separates completed, confirmed failed, unknown
and waiting-for-a-human operations, with phase history, budgets and approvals.
"""

from .. import store
from ..kernel import states as S
from ..store import jobs as job_rows
from ..store import operations as op_rows
from ..store.audit import REFUSAL_PREFIX
from . import budgets
from .jobs import get_job
from .serialize import approval_dict, iso, operation_dict


def _group(op):
    if op.state == S.CONFIRMED:
        return "completed"
    if op.state == S.FAILED:
        return "confirmed_failed"
    if op.state in S.IN_FLIGHT:
        return "unknown"
    if op.state in (S.NEEDS_REVIEW, S.PREPARED):
        return "pending_human"
    return "abandoned"


def job_report(tenant, job_id):
    job = get_job(tenant, job_id)
    groups = {"completed": [], "confirmed_failed": [], "unknown": [], "pending_human": [], "abandoned": []}
    for op in op_rows.operations_of_job(job.id):
        groups[_group(op)].append(operation_dict(op, job_id))
    history = [{"seq": c.seq, "phase": c.phase, "task_version": c.task_version, "actor": c.actor, "at": iso(c.created_at)}
               for c in job_rows.checkpoints_of_job(job.id)]
    approvals = [approval_dict(a) for a in job_rows.approvals_of_job(job.id, by_id=True)]
    return {
        "job_id": job.job_id,
        "task_version": job.task_version,
        "status": job.status,
        "halt_reason": job.halt_reason,
        "phase": job.phase,
        "operations": groups,
        "counts": {k: len(v) for k, v in groups.items()},
        "phase_history": history,
        "budgets": budgets.usage(job),
        "approvals": approvals,
    }


def acceptance_metrics(tenant):
    """Counters that prove exactly-once from the ledger's side (the remote side is counted by
    the acceptance suite from WordPress itself)."""
    double_confirmed = op_rows.tenant_operations_confirmed_twice(tenant)
    dup_remote = op_rows.tenant_duplicate_remote_ids(tenant)
    refusals = {}
    for action, n in job_rows.refusal_counts_of_tenant(tenant, REFUSAL_PREFIX):
        refusals[action[len(REFUSAL_PREFIX):]] = n
    unauthorized = sum(refusals.get(k, 0) for k in ("stale_fencing_token", "approval_required", "job_halted",
                                                    "job_cancelled", "forbidden", "budget_exhausted",
                                                    "write_not_dispatched", "digest_mismatch",
                                                    "fencing_token_not_issued"))
    checkpoint_refused = sum(refusals.get(k, 0) for k in ("phase_skipped", "precondition_failed",
                                                          "secret_in_checkpoint", "unknown_phase"))
    unknown_left = op_rows.count_tenant_operations_in_states(tenant, S.NEEDS_ATTENTION)
    resumes = job_rows.resume_attempts_of_tenant(tenant)
    return {
        "operations_confirmed_twice": double_confirmed,
        "duplicate_remote_ids": [{"action": r.action, "remote_id": r.remote_id, "operations": r.n} for r in dup_remote],
        "unauthorized_side_effects_refused": unauthorized,
        "checkpoint_advances_refused": checkpoint_refused,
        "unknown_operations_left": unknown_left,
        "resumes_per_job": resumes,
        "refusals_by_code": refusals,
    }


def gauges():
    """What /metrics shows: counts by state, status, refusal code and resume delivery state."""
    return store.counts(REFUSAL_PREFIX)
