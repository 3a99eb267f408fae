"""Approvals bound to content: job + task_version + action + content digest + target + expiry.

A resumed job must never inherit an approval given for another version or another text: the
match is on all five, and the digest is the same request digest the gate computes for the
payload that will be sent. So editing the body after approval, bumping the version, pointing
at another site, or waiting past the expiry all make `begin` answer halt/approval_required.
"""

import time
from datetime import datetime, timezone

from ..jobs.jobs import get_job
from ..kernel.errors import NotFound, ValidationFailed
from ..store.audit import audit
from ..store.models import Approval, ApprovalDenial

# Actions that need an approval whatever the caller says, per pipeline.
ALWAYS_GATED = {"article": ("publish",)}


def needs_approval(job, action, requested):
    return bool(requested) or _gated(action, ALWAYS_GATED.get(job.pipeline, ()))


def may_need_approval(action, requested):
    """Whether some pipeline's job could need an approval for this step (before the job is read)."""
    return bool(requested) or any(_gated(action, gated) for gated in ALWAYS_GATED.values())


def _gated(action, gated):
    return any(action == a or action.endswith("." + a) or action.startswith(a + ":") for a in gated)


def parse_expiry(value):
    try:
        ts = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except (AttributeError, ValueError) as exc:
        raise ValidationFailed("expires_at must be an ISO 8601 timestamp", {"field": "expires_at"}) from exc
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=timezone.utc)
    return ts.timestamp()


def grant(principal, job_id, task_version, action, content_digest, target, expires_at, note=None, now=None):
    now = time.time() if now is None else now
    job = get_job(principal.tenant, job_id)
    expiry = parse_expiry(expires_at) if isinstance(expires_at, str) else float(expires_at)
    if expiry <= now:
        raise ValidationFailed("expires_at is in the past", {"field": "expires_at"})
    approval = Approval.create(
        tenant=principal.tenant, job=job.id, task_version=task_version, action=action,
        content_digest=content_digest, target=target, policy_hash=job.policy_hash, expires_at=expiry,
        approved_by=principal.actor, note=note, created_at=now,
    )
    audit(principal.tenant, job.id, principal.actor, "approval_granted",
          {"approval_id": approval.id, "task_version": task_version, "action": action,
           "content_digest": content_digest, "target": target, "expires_at": expiry})
    return approval


def revoke(principal, approval_id, now=None):
    approval = Approval.get_or_none(Approval.id == approval_id, Approval.tenant == principal.tenant)
    if approval is None:
        raise NotFound(f"no approval {approval_id}", {"approval_id": approval_id})
    if approval.revoked_at is None:
        Approval.update(revoked_at=now or time.time(), revoked_by=principal.actor).where(
            Approval.id == approval.id).execute()
        audit(principal.tenant, approval.job_id, principal.actor, "approval_revoked", {"approval_id": approval.id})
    return Approval.get_by_id(approval.id)


def find_live(job, action, digest, target, now=None):
    now = time.time() if now is None else now
    q = (Approval.select().where(
        Approval.job == job.id, Approval.task_version == job.task_version, Approval.action == action,
        Approval.content_digest == digest, Approval.revoked_at.is_null(), Approval.expires_at > now)
        .order_by(Approval.id.desc()))
    if target is None:
        q = q.where(Approval.target.is_null(True) | (Approval.target == ""))
    else:
        q = q.where(Approval.target == target)
    for approval in q:
        # An approval given under another policy (tool allow-list, scopes) is not this one.
        if approval.policy_hash == job.policy_hash:
            return approval
    return None


def mark_used(principal, job, approval, action, target):
    """Record that a dispatch went out under ``approval`` (it stays live for the same content)."""
    Approval.update(used_at=time.time()).where(Approval.id == approval.id).execute()
    audit(principal.tenant, job.id, principal.actor, "approval_used",
          {"approval_id": approval.id, "action": action, "target": target})



def active_denial(op, digest=None):
    """The standing denial of this operation's digest, or None (read on the gate's refusal path
    only; see approvals/decisions.py)."""
    return (ApprovalDenial.select()
            .where(ApprovalDenial.operation == op.id, ApprovalDenial.content_digest == (digest or op.request_hash),
                   ApprovalDenial.lifted_at.is_null())
            .order_by(ApprovalDenial.id.desc()).first())


def binding_of(op):
    return (Approval.job == op.job_id, Approval.task_version == op.task_version, Approval.action == op.action,
            Approval.content_digest == op.request_hash, Approval.target == (op.target or ""),
            Approval.revoked_at.is_null())


def status_of(op, now=None):
    """'approved' (a live approval waits for the workflow), 'denied', or 'waiting'."""
    now = time.time() if now is None else now
    if Approval.select().where(*binding_of(op), Approval.expires_at > now).exists():
        return "approved"
    return "denied" if active_denial(op) is not None else "waiting"
