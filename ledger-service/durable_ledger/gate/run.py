"""The gate: load the facts, decide, act. Persists SENT before it answers ``dispatch``.

A round can lose a race: a concurrent claim or retry moved the row between our read and our
conditional write. Each loss means someone else made progress, so a few rounds always settle;
after `ROUNDS` the caller is told to send the same begin again (409 gate_contended) instead of
looping on a livelock.
"""

import time
from dataclasses import replace

from .. import store
from ..approvals import policy as approval_policy
from ..approvals import rules as approvals
from ..jobs.serialize import iso
from ..kernel import states as S
from ..kernel.checks import stored_budgets
from ..kernel.digest import request_digest
from ..kernel.errors import (
    ActionMismatch,
    DigestMismatch,
    FencingTokenNotIssued,
    GateContended,
    JobMismatch,
    LeaseLost,
    StaleFencingToken,
    TargetMismatch,
    ValidationFailed,
)
from ..kernel.fencing import check_fence
from ..kernel.n8n_context import stamp
from ..reconciliation import apply as reconciliation
from ..store.audit import audit, record_refusal, record_refused_call
from ..store.rows import NewOp
from . import decide as D
from .facts import check_stored, load, op_facts
from .mismatch import field_digests
from .request import MISSING, Answer, BeginRequest, GateConfig

ROUNDS = 4
LOST_RACE = object()
# Refusals raised before the decision table (the request does not fit the stored operation or the
# lease): recorded on the job's timeline, as the table's own refusals are.
RECORDED = (DigestMismatch, ActionMismatch, TargetMismatch, JobMismatch, StaleFencingToken, FencingTokenNotIssued,
            LeaseLost, approval_policy.ApprovalPolicyChanged)


def request(job_id, action, fencing_token, payload=MISSING, request_hash=None, operation_key=None, target=None,
            requires_approval=False, reconcile=True, config=None, approval_policy=None):
    """A `BeginRequest`, with the one digest approvals and the publishing proxy bind to. A step
    with an approval policy needs an approval."""
    if payload is MISSING and not request_hash:
        raise ValidationFailed("send 'payload' (digested by the ledger) or 'request_hash'", {"field": "payload"})
    digest = request_digest(payload) if payload is not MISSING else request_hash
    if request_hash and request_hash != digest:
        # If the client's word won over the payload it sent, an approval for payload A would
        # release payload B.
        raise DigestMismatch("request_hash is not the digest of the payload sent; send one of them, or both agreeing",
                             {"field": "request_hash", "given": request_hash, "computed": digest})
    rule = approval_policy_of(approval_policy)
    return BeginRequest(job_id, action, fencing_token, digest, payload, operation_key, target,
                        bool(requires_approval) or rule is not None, reconcile, config or GateConfig(),
                        field_digests(payload) if payload is not MISSING else None, rule)


def approval_policy_of(body):
    return approval_policy.normalize(body)


def begin(principal, job_id, action, fencing_token, **fields):
    """The gate for one step: an `Answer`. ``fields`` are `request`'s keyword arguments."""
    return run(principal, request(job_id, action, fencing_token, **fields))


def run(principal, req):
    """The gate for one `BeginRequest`: at most `ROUNDS` rounds of load, decide, act."""
    for _ in range(ROUNDS):
        try:
            answer = decide_round(principal, req)
        except RECORDED as exc:
            exc.recorded = record_refused_call(principal.tenant, req.job_id, principal.actor, exc.code, stamp({
                "action": req.action, "operation_key": exc.details.get("operation_key") or req.operation_key,
                "reason": exc.message, **{k: exc.details[k] for k in ("fields", "given", "current")
                                          if k in exc.details}}))
            raise
        if answer is not LOST_RACE:
            return answer
    raise GateContended("the operation kept changing while the gate decided; send the same begin again",
                        {"job_id": req.job_id, "action": req.action})


def decide_round(principal, req):
    now = time.time()
    loaded = load(principal, req, now)
    if loaded.claimed is not None:  # row 3, decided and claimed by the store in the load itself
        return Answer(S.DISPATCH, loaded.claimed, req.job_id)
    decision, extras = D.decide(loaded.facts), {}
    if decision.act == D.RECONCILE:
        outcome, verdict, loaded.op = reconciliation.reconcile_operation(
            loaded.op, principal.actor, req.config.reconcile_claim_s, escalate=False)
        extras = {"reconciliation": {"outcome": outcome} if outcome == D.NO_RECONCILER else
                  {"outcome": outcome, "verdict": verdict, "evidence": loaded.op.evidence}}
        decision = D.decide(replace(loaded.facts, op=op_facts(loaded.op), reconciled=outcome))
    return act(principal, req, loaded, decision, extras, now)


def act(principal, req, loaded, d, extras, now):
    job, op = loaded.job, loaded.op
    if d.act == D.PREPARE:
        op = store.insert_prepared(_new_op(principal, req, loaded, now), stamp({"reason": "approval_required"}))
        # The key may have been taken between our load and this insert (the store then returns
        # the row that is there): answer as a begin that had loaded that row would, e.g. 422
        # digest_mismatch for another payload, not "approval_required" for someone else's content.
        check_stored(op, job, req)
    if d.refusal:
        _record(principal, req, loaded, d)
    if d.act in (D.CLAIM_NEW, D.CLAIM_RETRY):
        if d.use_approval:
            _spend(principal, job, req, loaded.approval)
            now = time.time()  # the dispatch follows the approval's use on the job's timeline
        return _claim(principal, req, loaded, d, extras, now)
    if d.act == D.NOTE_REUSE:
        _note_reuse(principal, job, op, req.fencing_token)
        return Answer(d.kind, op, req.job_id, receipt={"remote_id": op.remote_id, **(op.receipt or {})}, extras=extras)
    if d.retry_after is not None:
        extras["retry_after"] = d.retry_after
    if d.reason == "approval_denied":
        denial = loaded.denial
        extras["denial"] = {"reason": denial.reason, "denied_by": denial.denied_by, "at": iso(denial.created_at)}
    return Answer(d.kind, op, req.job_id, d.reason, budget=d.budget, extras=extras)


def _claim(principal, req, loaded, d, extras, now):
    job = loaded.job
    counted = D.counted(job.budgets)

    def may_dispatch(guard):
        return D.budget_refusal(guard, now)

    if d.act == D.CLAIM_NEW:
        new = _new_op(principal, req, loaded, now, requires_approval=req.requires_approval or d.use_approval)
        claimed = store.claim_new(new, may_dispatch, counted, stamp({"attempt": 1}))
        if claimed is None:
            # Lost the key to a concurrent claim, or the token stopped being current between
            # our read and our write: the latter must surface as 409, not as a silent no-op.
            check_fence(store.lease_of(job.id), req.fencing_token)
    else:
        claimed = store.claim_retry(loaded.op, req.fencing_token, principal.actor, now, may_dispatch, counted,
                                    stamp({}))
    if claimed is None:
        return LOST_RACE  # someone else moved it first; the next round answers from what they left
    if isinstance(claimed, D.Refused):
        refused = claimed.decision()
        _record(principal, req, loaded, refused)
        op = loaded.op if d.act == D.CLAIM_RETRY else None
        return Answer(refused.kind, op, req.job_id, refused.reason, budget=refused.budget, extras=extras)
    return Answer(S.DISPATCH, claimed, req.job_id, extras=extras)


def _new_op(principal, req, loaded, now, requires_approval=True):
    job = loaded.job
    max_attempts = stored_budgets(job).get("max_attempts") or req.config.default_max_attempts
    return NewOp(principal.tenant, loaded.key, job.id, job.task_version, req.action, req.digest, req.fencing_token,
                 req.target, requires_approval, max_attempts, principal.actor,
                 req.summary, now, fields=req.fields, policy=approval_policy.stored(req.policy, principal.name))


def _spend(principal, job, req, approval):
    """Mark the live approval used (it stays valid: a retry of the same content needs it again)."""
    approvals.mark_used(principal, job, approval, req.action, req.target)


def _record(principal, req, loaded, d):
    if d.refusal == "budget_exhausted":
        detail = {"budget": d.budget, "operation_key": loaded.key}
    elif d.refusal in ("job_cancelled", "job_halted"):
        detail = {"operation_key": loaded.key, "reason": d.reason}
    else:
        detail = {"operation_key": loaded.key, "target": req.target}
    record_refusal(principal.tenant, loaded.job.id, principal.actor, d.refusal, detail)


def _note_reuse(principal, job, op, token):
    """Evidence for the job timeline that a run was answered from the receipt instead of repeating
    the side effect. Best effort (like refusals): the answer matters more than its record."""
    try:
        audit(principal.tenant, job.id, principal.actor, "receipt_reused",
              {"operation_key": op.operation_key, "remote_id": op.remote_id, "fencing_token": token})
    except Exception:  # noqa: BLE001
        pass
