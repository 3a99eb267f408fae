"""Jobs: one business task, stable across retries, restarts and sessions."""

import time

from .. import store
from ..kernel.errors import JobNotFound, TaskVersionLower, ValidationFailed
from ..kernel.fencing import check_fence
from ..kernel.phases import PIPELINES
from ..store import jobs as job_rows
from ..store.db import IntegrityError, write_txn

BUDGET_KEYS = ("deadline_s", "max_cost", "max_tool_calls", "max_resume_attempts", "max_attempts")


def check_spec(pipeline, phases, budgets):
    if phases is None and pipeline not in PIPELINES and pipeline != "generic":
        raise ValidationFailed(
            f"unknown pipeline '{pipeline}'; use one of {sorted(PIPELINES)} or 'generic', or send 'phases'",
            {"field": "pipeline"},
        )
    unknown = sorted(set(budgets or {}) - set(BUDGET_KEYS))
    if unknown:
        raise ValidationFailed(f"unknown budget(s) {unknown}", {"field": "budgets", "allowed": list(BUDGET_KEYS)})


def create_or_get_job(tenant, job_id, *, task_version=1, pipeline="generic", phases=None,
                      budgets=None, policy_hash=None, actor="system"):
    """Returns (job, created). Claim by INSERT; a concurrent creator's row wins and is returned.

    No ``session_id`` here: a job gets its session only by binding it
    (``durable_ledger.agents.sessions``), which checks the session and writes ``Job.session_id``."""
    existing = job_rows.find_job(tenant, job_id)
    if existing is not None:
        return existing, False
    check_spec(pipeline, phases, budgets)
    now = time.time()
    try:
        with write_txn():
            job = job_rows.insert_job(tenant, job_id, {"task_version": task_version, "pipeline": pipeline,
                                                       "phases": phases, "budgets": budgets or {},
                                                       "policy_hash": policy_hash}, actor, now)
        return job, True
    except IntegrityError:
        job = job_rows.find_job(tenant, job_id)
        if job is None:
            raise
        return job, False


def get_job(tenant, job_id):
    job = job_rows.find_job(tenant, job_id)
    if job is None:
        raise JobNotFound(f"no job '{job_id}' in tenant '{tenant}'", {"job_id": job_id})
    return job


def current_lease(job):
    """The job's lease row (owner, token, expiry), or None before the first Start Job."""
    return store.lease_of(job.id)


def get_job_and_lease(tenant, job_id):
    job = get_job(tenant, job_id)
    return job, store.lease_of(job.id)


def bump_version(tenant, job_id, fencing_token, actor, to=None):
    """Start task version ``to`` of the job (default: the next one), under the current token.

    Default operation keys name the version, so the new version's steps are new operations, and
    approvals are bound to the version they were given for: none carries over. Asking for the
    current version again changes nothing (two executions starting the same new version); a
    lower one is refused (`TaskVersionLower`): versions only go up."""
    job = get_job(tenant, job_id)
    while True:
        now = time.time()
        with write_txn():
            # The fence inside the write (the lease row FOR SHARE on PostgreSQL): a takeover between
            # the check and the update would otherwise let a fenced-out execution change the version.
            check_fence(store.lease_of(job.id, lock=True), fencing_token)
            current = job_rows.job_task_version(job.id)
            target = current + 1 if to is None else to
            if target < current:
                raise TaskVersionLower(
                    f"job '{job_id}' is at task version {current}; version {target} cannot be started again "
                    f"(versions only go up): set Task Version to {current} or higher, or use a new Job ID",
                    {"field": "task_version", "given": target, "current": current})
            if target == current:
                return job_rows.job_by_pk(job.id)
            n = job_rows.set_task_version(job.id, current, target, now)
            if n == 1:
                job_rows.log_job_event(tenant, job.id, actor, "version_bumped", {"from": current, "to": target}, now)
                return job_rows.job_by_pk(job.id)
        # another bump committed between our read and our write: decide again on its result
        to = target
