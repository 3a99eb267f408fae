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
from ..store import approvals as store_approvals
from ..store.audit import audit

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
    approval = store_approvals.add_approval(
        principal.tenant, job.id, task_version, action, content_digest, target, job.policy_hash, expiry,
        principal.actor, note, now)
    audit(principal.tenant, job.id, principal.actor, "approval_granted",
          {"approval_id": approval.id, "task_version": task_version, "action": action,
           "content_digest": content_digest, "target": target, "expires_at": expiry})
    return approval


def revoke(principal, approval_id, now=None):
    approval = store_approvals.approval_of_tenant(principal.tenant, approval_id)
    if approval is None:
        raise NotFound(f"no approval {approval_id}", {"approval_id": approval_id})
    if approval.revoked_at is None:
        store_approvals.revoke_approval(approval.id, principal.actor, now or time.time())
        audit(principal.tenant, approval.job_id, principal.actor, "approval_revoked", {"approval_id": approval.id})
    return store_approvals.get_approval(approval.id)


def find_live(job, action, digest, target, now=None):
    now = time.time() if now is None else now
    for approval in store_approvals.live_approvals_of_job(job, action, digest, target, now):
        # An approval given under another policy (tool allow-list, scopes) is not this one.
        if approval.policy_hash == job.policy_hash:
            return approval
    return None


def mark_used(principal, job, approval, action, target):
    """Record that a dispatch went out under ``approval`` (it stays live for the same content)."""
    store_approvals.mark_approval_used(approval.id, time.time())
    audit(principal.tenant, job.id, principal.actor, "approval_used",
          {"approval_id": approval.id, "action": action, "target": target})



def active_denial(op, digest=None):
    """The standing denial of this operation's digest, or None (read on the gate's refusal path
    only; see approvals/decisions.py)."""
    return store_approvals.standing_denial(op.id, digest or op.request_hash)


def status_of(op, now=None):
    """'approved' (a live approval waits for the workflow), 'denied', or 'waiting'."""
    now = time.time() if now is None else now
    if store_approvals.has_live_approval(op, now):
        return "approved"
    return "denied" if active_denial(op) is not None else "waiting"
