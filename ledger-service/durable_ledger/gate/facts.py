"""Load what the gate decides on: the job, its lease, the operation, the live approval.

One round trip on the hot path (`store.load_gate`); the approval, denial and dispatch-count
reads happen only for the steps they can change.
"""

from dataclasses import dataclass
from typing import Any

from .. import store
from ..approvals import policy as approval_policy
from ..approvals import rules as approvals
from ..kernel import states as S
from ..kernel.budgets import exhausted_budget
from ..kernel.checks import stored_budgets
from ..kernel.digest import default_operation_key
from ..kernel.errors import ActionMismatch, JobMismatch, JobNotFound, TargetMismatch
from ..kernel.fencing import check_fence
from ..kernel.n8n_context import stamp
from .decide import Facts, OpFacts
from .mismatch import check_digest


@dataclass
class Loaded:
    job: Any
    op: Any
    key: str
    approval: Any  # the live approval a dispatch would spend, or None
    denial: Any  # the standing denial of this digest, or None
    facts: Facts
    claimed: Any = None  # the operation the store claimed while loading (PostgreSQL's one-statement begin)


def op_facts(op):
    if op is None:
        return None
    absent = op.state == S.FAILED and bool((op.last_error or {}).get("reconciled"))
    return OpFacts(op.state, op.retryable, op.attempt, op.max_attempts, op.updated_at, absent)


def check_stored(op, job, req):
    """Once a key exists its row decides: a begin naming another job, action, target or request
    is refused, never re-interpreted. Without this a begin could rename a PREPARED `publish`
    (approval needed) to `set_status` and be answered dispatch for the same row: the approval
    need would come from the request's action while the proxy publishes the stored one."""
    if op.job_id != job.id:
        raise JobMismatch("this operation key belongs to another job; use a key of this job",
                          {"operation_key": op.operation_key, "field": "job_id", "given": req.job_id})
    if op.action != req.action:
        raise ActionMismatch(
            f"this operation key was first used for action '{op.action}'; send that action, or use a new key",
            {"operation_key": op.operation_key, "field": "action", "stored": op.action, "given": req.action})
    # A begin that names no target names none to disagree with: the stored one applies (below).
    if req.target and (op.target or None) != req.target:
        raise TargetMismatch(
            "this operation key was first used with another target; send that target, or use a new key",
            {"operation_key": op.operation_key, "field": "target", "stored": op.target, "given": req.target})
    check_digest(op, req.digest, req.fields)
    approval_policy.check_unchanged(op, req.policy)


def load(principal, req, now):
    tenant = principal.tenant
    job, lease, op, key, claimed = store.load_gate(
        tenant, req.job_id, req.operation_key, req.action,
        lambda version: default_operation_key(tenant, req.job_id, version, req.action),
        lambda: _claim(principal, req, now))
    if job is None:
        raise JobNotFound(f"no job '{req.job_id}' in tenant '{tenant}'", {"job_id": req.job_id})
    check_fence(lease, req.fencing_token)
    if op is not None:
        check_stored(op, job, req)
    would_dispatch = op is None or op.state in (S.PREPARED, S.FAILED)
    budget = (exhausted_budget(stored_budgets(job), job.cost, job.created_at, lambda: store.count_dispatches(job.id),
                               now) if would_dispatch else None)
    # Raised by the request or the stored row, never lowered by a later request.
    needed = approvals.needs_approval(job, req.action, req.requires_approval or bool(op and op.requires_approval))
    target = op.target if op is not None else req.target  # the stored row's, once there is one
    # The stored row's policy once there is one; this request's (and its runner) at the first begin.
    policy = op.approval_policy if op is not None else approval_policy.stored(req.policy, principal.name)
    approval = approvals.find_live(job, req.action, req.digest, target, now, policy) if needed and would_dispatch \
        else None
    denial = approvals.active_denial(op, req.digest) if needed and op is not None and approval is None else None
    facts = Facts(job.status, job.halt_reason, budget, op_facts(op), needed, approval is not None,
                  denial is not None, now, req.config.backoff_base_s, req.reconcile)
    return Loaded(job, op, key, approval, denial, facts, claimed)


def _claim(principal, req, now):
    """The claim the store may make while it loads (a new operation with nothing in its way), or
    None when an approval could be needed: that is for the decision table to weigh. Built only
    when the store asks (PostgreSQL's one-statement begin; SQLite's load never claims)."""
    if approvals.may_need_approval(req.action, req.requires_approval):
        return None
    return store.ClaimTemplate(req.action, req.digest, req.fencing_token, req.target, principal.actor,
                               req.summary, stamp({"attempt": 1}), req.config.default_max_attempts, now, req.fields)
