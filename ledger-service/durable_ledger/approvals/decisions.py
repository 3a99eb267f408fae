"""Deciding on one waiting operation: approve or deny what the gate halted with approval_required.

The gate (`operations.begin`) records a gated step it may not dispatch as PREPARED with
``requires_approval``. An approver decides on *that* operation, so the approval is bound to its
job, task version, action, request digest (the content digest) and target, until an expiry.

Both decisions are bound to what the approver was shown: the caller passes the digest it
displayed, and a check (for a WordPress publish: the post read back through the proxy, see
``approvals/preview.py``) that raises ``ContentChanged`` when the remote content moved since. The
digest of an operation key never changes (a new digest is a 422 at the gate), so a changed
digest means the page showed another operation's version.

Both are also bound to the decision state the page showed (``decision_state``: the operation's
state, its standing denial and its live approval). A decision taken meanwhile elsewhere (the API,
another tab) makes the click a ``DecisionChanged`` instead of silently overriding it:

    page opened (no denial) ... API: deny (reason) ... click Approve -> refused, the denial stands

Double submits are no-ops. The decision runs in one write transaction that first locks the
operation row (SQLite's IMMEDIATE lock; FOR UPDATE on PostgreSQL), then looks for a decision
already standing for the same binding:

    click 1: lock op ... no live approval -> INSERT approval ... commit
    click 2:        lock op (waits) ...................................... sees it -> no-op

With an approval policy (approvals/policy.py) the operation needs N distinct allowed approvers:
each decision is checked against it first (403 approver_not_allowed), an approver who approved
already is a no-op (counted once), and the decision state a page carries names an approval only
once the policy is satisfied, so two approvers of a 2-of-3 step clicking at once both count:

    alice: lock op ... 0 of 2 -> INSERT approval (1 of 2) ... commit
    bob:          lock op (waits) ............................ 1 of 2 -> INSERT (2 of 2) ... commit -> resume
    carol:                       lock op (waits) ......................................... 2 of 2 -> no-op

The execution waiting for the step is resumed once, when the count is reached (or at a denial).

Denial: a row in ``approval_denial`` for (operation, digest). While it stands `begin` answers
halt/``approval_denied`` (with the reason) instead of approval_required. A later approval of the
same digest lifts it (the approver changed their mind: that is an explicit decision, audited);
under a policy only the approver who denied can lift it that way: a denial by any allowed approver
stops the step, and a second approver cannot outvote it. A denial revokes live approvals of the
same binding that the workflow has not used yet.
"""

import time

from .. import store
from ..jobs.operations import get_operation
from ..jobs.serialize import iso
from ..kernel import states as S
from ..kernel.bodies import MAX_APPROVAL_TTL_S
from ..kernel.errors import ContentChanged, DecisionChanged, InvalidTransition, ValidationFailed
from ..store import approvals as store_approvals
from ..store.audit import audit
from ..store.db import write_txn
from . import policy as approval_policy
from . import waits as approval_waits
from .rules import active_denial, satisfied

DOORS = ("console", "link", "api")

DEFAULT_TTL_S = 24 * 3600
MAX_TTL_S = MAX_APPROVAL_TTL_S  # kernel/bodies.py declares it for the approve body


def _check_shown(op, shown_digest):
    if shown_digest != op.request_hash:
        raise ContentChanged("the request changed since the page was shown; reload it and decide again",
                             {"operation_key": op.operation_key, "shown": shown_digest, "current": op.request_hash})


def decision_state(op, now=None):
    """What a decision page shows and its form carries back: 'STATE:denial id:approval id' (0: none).
    The approval is the one that satisfied the policy: approvals short of its count do not change
    the state, so they never make another approver's click stale."""
    now = time.time() if now is None else now
    denial, approval = active_denial(op), satisfied(op, now)
    return f"{op.state}:{denial.id if denial else 0}:{approval.id if approval else 0}"


def _check_still_shown(op, shown_state, now):
    """Inside the decision's transaction, the operation row locked. ``shown_state`` None: not asked
    (the HTTP API decides on the operation as it stands)."""
    if shown_state is None:
        return
    current = decision_state(op, now)
    if shown_state == current:
        return
    denial, approval = active_denial(op), satisfied(op, now)
    if op.state != S.PREPARED:
        what = f"the step is {op.state} now"
    elif denial is not None:
        what = f"it was denied by {denial.denied_by} meanwhile: {denial.reason}"
    elif approval is not None:
        what = f"it was approved by {approval.approved_by} meanwhile"
    else:
        what = "an earlier decision on it was withdrawn meanwhile"
    raise DecisionChanged(f"{what}. Reload the page and decide again.",
                          {"operation_key": op.operation_key, "shown": shown_state, "current": current})


def _name(actor):
    return (actor or "").split(":", 1)[-1]


def approve(principal, key, shown_digest, ttl_s=None, note=None, check_content=None, now=None, shown_state=None,
            door="api"):
    """Returns (approval, created). ``created`` is False when the same approval already stood
    (this approver's, or the policy was satisfied already). ``shown_state``: the page's
    `decision_state`; refused if the decision moved since (see above). ``door``: console, link, api."""
    principal.require("approver")
    op = get_operation(principal.tenant, key)
    _check_shown(op, shown_digest)
    approval_policy.check_allowed(op.approval_policy, principal, key)
    ttl_s = DEFAULT_TTL_S if ttl_s is None else float(ttl_s)
    if not 60 <= ttl_s <= MAX_TTL_S:
        raise ValidationFailed(f"expiry must be between 60 s and {MAX_TTL_S} s from now", {"field": "expires_in_s"})
    if op.state != S.PREPARED or not op.requires_approval:
        existing = store_approvals.latest_approval_for(op)
        if existing is not None:
            return existing, False  # approved and already used by the workflow: a late second click
        raise InvalidTransition(f"operation is {op.state}; it is not waiting for an approval", {"state": op.state})
    if check_content is not None:
        check_content(op)  # outside the transaction: it may ask WordPress (seconds, not a lock hold)
    now = time.time() if now is None else now
    with write_txn():
        op = store.operation_locked(op.id)
        mine = [a for a in store_approvals.live_approvals_for(op, now)
                if approval_policy.approver_of(a)[0] == principal.name]
        if mine:
            return mine[-1], False  # this approver approved already: counted once
        done = satisfied(op, now)
        if done is not None:
            return done, False  # the policy has its count: a late click adds nothing
        _check_still_shown(op, shown_state, now)
        denial = active_denial(op)
        if denial is not None and op.approval_policy is not None and _name(denial.denied_by) != principal.name:
            raise DecisionChanged(f"{_name(denial.denied_by)} denied it: {denial.reason}. Under this step's approval "
                                  "policy one allowed approver's denial stops it; only they can lift it",
                                  {"operation_key": op.operation_key, "denied_by": _name(denial.denied_by)})
        job = store_approvals.job_by_pk(op.job_id)
        approval = store_approvals.add_approval(
            principal.tenant, op.job_id, op.task_version, op.action, op.request_hash, op.target or "",
            job.policy_hash, now + ttl_s, principal.actor, note, now, principal.name, principal.groups, door)
        lifted = store_approvals.lift_denials(op, principal.actor, now)
        now_done = satisfied(op, now) is not None
        audit(principal.tenant, op.job_id, principal.actor, "approval_granted",
              {"approval_id": approval.id, "operation_key": op.operation_key, "task_version": op.task_version,
               "action": op.action, "content_digest": op.request_hash, "target": op.target,
               "expires_at": approval.expires_at, "note": note, "denial_lifted": bool(lifted),
               "by": principal.name, "door": door, "approvals": len(approval_policy.counted(
                   op.approval_policy, store_approvals.live_approvals_for(op, now))),
               "approvals_needed": approval_policy.needed(op.approval_policy), "satisfied": now_done})
    if now_done:
        approval_waits.decision_made(principal.tenant, op.operation_key, "approved", note)
    return approval, True


def deny(principal, key, shown_digest, reason, now=None, shown_state=None, door="api"):
    """Returns (denial, created). Denying needs no read-back: refusing is always safe; but it
    revokes an unused approval, so one given after the page was shown refuses it (``shown_state``)."""
    principal.require("approver")
    reason = (reason or "").strip()
    if not reason:
        raise ValidationFailed("a denial needs a reason (the workflow shows it)", {"field": "reason"})
    if len(reason) > 2000:
        raise ValidationFailed("reason is longer than 2000 characters", {"field": "reason"})
    op = get_operation(principal.tenant, key)
    _check_shown(op, shown_digest)
    approval_policy.check_allowed(op.approval_policy, principal, key)
    if op.state != S.PREPARED or not op.requires_approval:
        raise InvalidTransition(f"operation is {op.state}; it is not waiting for an approval", {"state": op.state})
    now = time.time() if now is None else now
    with write_txn():
        op = store.operation_locked(op.id)
        if op.state != S.PREPARED:
            raise InvalidTransition(f"operation moved to {op.state} while you were deciding", {"state": op.state})
        standing = active_denial(op)
        if standing is not None:
            return standing, False
        _check_still_shown(op, shown_state, now)
        denial = store_approvals.add_denial(principal.tenant, op, reason, principal.actor, now, door)
        for a in store_approvals.unused_approvals_for(op):
            store_approvals.revoke_approval(a.id, principal.actor, now)
            audit(principal.tenant, op.job_id, principal.actor, "approval_revoked",
                  {"approval_id": a.id, "operation_key": op.operation_key, "because": "denied"})
        audit(principal.tenant, op.job_id, principal.actor, "approval_denied",
              {"denial_id": denial.id, "operation_key": op.operation_key, "task_version": op.task_version,
               "action": op.action, "content_digest": op.request_hash, "target": op.target, "reason": reason,
               "by": principal.name, "door": door})
    approval_waits.decision_made(principal.tenant, op.operation_key, "denied", reason)
    return denial, True


def waiting(tenant, limit=200):
    """Operations the gate halted for an approval, oldest first, with their standing decision."""
    ops = store_approvals.operations_waiting_for_approval(tenant, limit)
    now = time.time()
    out = []
    for op in ops:
        out.append({"op": op, "approval": satisfied(op, now), "denial": active_denial(op)})
    return out


def denial_dict(d):
    return {"id": d.id, "operation_key": d.operation.operation_key, "content_digest": d.content_digest,
            "reason": d.reason, "denied_by": d.denied_by, "door": d.door, "created_at": iso(d.created_at),
            "lifted_at": iso(d.lifted_at), "lifted_by": d.lifted_by}


def asked(op):
    """(who asked, when) for a waiting step: the run that recorded it PREPARED."""
    ev = store_approvals.first_prepared_event(op.id)
    return (ev.actor, ev.created_at) if ev else (None, op.created_at)


def recent(tenant, n=10):
    """The tenant's last ``n`` approval decisions (audit rows), newest first."""
    return store_approvals.recent_decisions(tenant, n)
