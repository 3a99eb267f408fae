"""Checkpoints: evidence of where a job may continue, never a self-summary.

The ledger refuses a checkpoint that skips a phase, comes from a stale token, claims a draft
without a confirmed draft operation, sets approval_status without the approver role, or
carries anything that looks like a credential.
"""

import time

from peewee import fn

from .. import store
from ..kernel import states as S
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
from ..store.db import write_txn
from ..store.models import AuditLog, Checkpoint, Job, Operation
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
    confirmed = (Operation.select(Operation.id)
                 .where(Operation.job == job.id, Operation.task_version == job.task_version,
                        Operation.state == S.CONFIRMED,
                        (Operation.action == suffix) | (Operation.action.endswith("." + suffix)))
                 .exists())
    if not confirmed:
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
        n = (Job.update(phase=phase, checkpoint={"phase": phase, "task_version": version, **stored},
                        updated_at=now)
             .where(Job.id == job.id, (Job.phase == job.phase) if job.phase else Job.phase.is_null())
             .execute())
        if n != 1:
            raise PhaseSkipped("the job's phase changed concurrently; re-read and retry", {})
        seq = (Checkpoint.select(fn.COALESCE(fn.MAX(Checkpoint.seq), 0)).where(Checkpoint.job == job.id).scalar()) + 1
        cp = Checkpoint.create(job=job.id, seq=seq, phase=phase, task_version=version, body=stored,
                               fencing_token=fencing_token, actor=principal.actor, created_at=now)
        AuditLog.create(tenant=principal.tenant, job=job.id, actor=principal.actor, action="checkpoint",
                        detail={"phase": phase, "seq": seq}, created_at=now)
    return Job.get_by_id(job.id), cp


def list_checkpoints(tenant, job_id):
    job, _ = get_job_and_lease(tenant, job_id)
    return list(Checkpoint.select().where(Checkpoint.job == job.id).order_by(Checkpoint.seq))
