"""Checkpoints: evidence of where a job may continue, never a self-summary.

The ledger refuses a checkpoint that skips a phase, comes from a stale token, claims a draft
without a confirmed draft operation, sets approval_status without the approver role, or
carries anything that looks like a credential.
"""

import time

from .. import store
from ..kernel.errors import (
    Forbidden,
    PhaseSkipped,
    PreconditionFailed,
    SecretInCheckpoint,
    UnknownPhase,
    ValidationFailed,
)
from ..kernel.fencing import check_fence
from ..kernel.phases import phases_for
from ..kernel.secrets import find_secrets
from ..store import jobs as job_rows
from ..store.db import write_txn
from ..store.operations import job_has_confirmed_operation
from .jobs import get_job_and_lease

# Phase -> the action suffix that must have a CONFIRMED operation for the job's version.
EVIDENCE_REQUIRED = {"DRAFT_CONFIRMED": "create_draft", "PUBLISHED": "publish"}


def _check_phase(job, phase):
    order = phases_for(job)
    if order is None:
        return
    if phase not in order:
        raise UnknownPhase(f"phase '{phase}' is not part of pipeline '{job.pipeline}'",
                           {"phase": phase, "phases": list(order)})
    current = order.index(job.phase) if job.phase in order else -1
    wanted = order.index(phase)
    if wanted > current + 1:
        raise PhaseSkipped(
            f"cannot go from {job.phase or 'the start'} to {phase}: {order[current + 1]} comes first",
            {"current": job.phase, "wanted": phase, "next_allowed": order[current + 1]},
        )


def _check_evidence(job, phase):
    suffix = EVIDENCE_REQUIRED.get(phase)
    if suffix is None or phases_for(job) is None:
        return
    if not job_has_confirmed_operation(job.id, job.task_version, suffix):
        raise PreconditionFailed(
            f"{phase} needs a CONFIRMED '{suffix}' operation for version {job.task_version}",
            {"phase": phase, "required_action": suffix},
        )


def save_checkpoint(principal, job_id, fencing_token, phase, body):
    """body: task_version, artifacts, remote, next_allowed_actions, approval_status (optional)."""
    if "approval_status" in body and body["approval_status"] is not None and principal.role not in ("approver", "admin"):
        raise Forbidden("only an approver may set approval_status", {"field": "approval_status"})
    # The phase is scanned too: it is stored on the job and shown in every read of it.
    leaks = list(find_secrets({"phase": phase, **body}))
    if leaks:
        raise SecretInCheckpoint(
            "the checkpoint contains something that looks like a credential; store a reference instead",
            {"paths": [p for p, _ in leaks][:20]},
        )
    job, lease = get_job_and_lease(principal.tenant, job_id)
    check_fence(lease, fencing_token)
    version = body.get("task_version", job.task_version)
    if version != job.task_version:
        raise ValidationFailed(f"task_version {version} is not the job's current version {job.task_version}",
                               {"field": "task_version", "current": job.task_version})
    _check_phase(job, phase)
    _check_evidence(job, phase)
    now = time.time()
    stored = {k: body.get(k) for k in ("artifacts", "remote", "next_allowed_actions", "approval_status")}
    stored["artifacts"] = stored["artifacts"] or []
    stored["remote"] = stored["remote"] or {}
    stored["next_allowed_actions"] = stored["next_allowed_actions"] or []
    with write_txn():
        check_fence(store.lease_of(job.id, lock=True), fencing_token)
        # Conditional on the phase we validated against: a concurrent checkpoint that moved
        # the job meanwhile makes this one re-validate instead of skipping over it.
        n = job_rows.advance_job_phase(job.id, job.phase, phase, {"phase": phase, "task_version": version, **stored},
                                       now)
        if n != 1:
            raise PhaseSkipped("the job's phase changed concurrently; re-read and retry", {})
        cp = job_rows.append_checkpoint(job.id, phase, version, stored, fencing_token, principal.actor, now)
        job_rows.log_job_event(principal.tenant, job.id, principal.actor, "checkpoint",
                               {"phase": phase, "seq": cp.seq}, now)
    return job_rows.job_by_pk(job.id), cp


def list_checkpoints(tenant, job_id):
    job, _ = get_job_and_lease(tenant, job_id)
    return list(job_rows.checkpoints_of_job(job.id))
