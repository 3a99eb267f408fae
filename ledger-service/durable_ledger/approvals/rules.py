"""Approvals bound to content: job + task_version + action + content digest + target + expiry.

A resumed job must never inherit an approval given for another version or another text: the
match is on all five, and the digest is the same request digest the gate computes for the
payload that will be sent. So editing the body after approval, bumping the version, pointing
at another site, or waiting past the expiry all make `begin` answer halt/approval_required.
"""

import time
from datetime import datetime, timezone

from ..jobs.jobs import get_job
from ..jobs import serialize
from ..kernel.errors import NotFound, ValidationFailed
from ..store import approvals as store_approvals
from ..store.audit import audit
from . import policy as approval_policy

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
        principal.actor, note, now, principal.name, principal.groups, "api")
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


def find_live(job, action, digest, target, now=None, policy=None):
    """The live approval a dispatch spends, or None. ``policy`` (the operation's approval policy,
    approvals/policy.py): None is one approval by anyone; otherwise it needs its count of distinct
    allowed approvers, each with a live approval of this binding, and the newest of them is spent."""
    now = time.time() if now is None else now
    # An approval given under another job policy (tool allow-list, scopes) is not this one.
    live = (a for a in store_approvals.live_approvals_of_job(job, action, digest, target, now)
            if a.policy_hash == job.policy_hash)
    if policy is None:
        return next(live, None)
    counted = approval_policy.counted(policy, list(live))
    return max(counted, key=lambda a: a.id) if len(counted) >= approval_policy.needed(policy) else None


def mark_used(principal, job, approval, action, target):
    """Record that a dispatch went out under ``approval`` (it stays live for the same content)."""
    store_approvals.mark_approval_used(approval.id, time.time())
    audit(principal.tenant, job.id, principal.actor, "approval_used",
          {"approval_id": approval.id, "action": action, "target": target})



def active_denial(op, digest=None):
    """The standing denial of this operation's digest, or None (read on the gate's refusal path
    only; see approvals/decisions.py)."""
    return store_approvals.standing_denial(op.id, digest or op.request_hash)


def counted(op, now=None):
    """The live approvals of what ``op`` would send that its policy counts (one per approver)."""
    now = time.time() if now is None else now
    return approval_policy.counted(op.approval_policy, store_approvals.live_approvals_for(op, now))


def satisfied(op, now=None):
    """The newest counted approval when the policy has its count, else None."""
    got = counted(op, now)
    return max(got, key=lambda a: a.id) if len(got) >= approval_policy.needed(op.approval_policy) else None


def status_of(op, now=None):
    """'approved' (the policy has its live approvals; the workflow may go on), 'denied', or
    'waiting' (none yet, or fewer than the policy needs)."""
    if satisfied(op, now) is not None:
        return "approved"
    return "denied" if active_denial(op) is not None else "waiting"


def decided_by(op):
    """Who decided on what ``op`` sends: [{name, decision, at, door}], oldest first."""
    return serialize.decided_by(store_approvals.approvals_for(op), store_approvals.denials_for(op))


def policy_view(op, now=None):
    """The policy and its progress as pages and answers show them."""
    got = counted(op, now)
    policy = op.approval_policy
    return {**approval_policy.public(policy), "requested_by": (policy or {}).get("requested_by"),
            "approved_by": [approval_policy.approver_of(a)[0] for a in got], "approvals": len(got),
            "satisfied": len(got) >= approval_policy.needed(policy)}
