"""The editors' review queue: UNKNOWN and NEEDS_REVIEW operations with their evidence.

An editor decides with the evidence in front of them: confirm (naming the remote object,
which the ledger re-verifies exists), fail (a retry becomes allowed) or abandon. Every
decision is audited with the editor's identity. Decisions are conditional on the state the
editor saw, so a late confirm from the original run is never overwritten.
"""

import time

from .. import store
from ..jobs import evidence as said
from ..jobs.operations import get_operation
from ..jobs.serialize import decided_by, iso
from ..kernel import states as S
from ..kernel.errors import InvalidTransition, ValidationFailed
from ..kernel.secrets import redact
from ..store import approvals as store_approvals
from ..store import reviews as review_store
from ..store.audit import audit
from ..store.db import write_txn
from . import attempts, registry
from .verdicts import ReconcilerError

QUEUE_STATES = (S.UNKNOWN, S.NEEDS_REVIEW)


def _item(op, job_id):
    """What an editor sees; stored evidence goes through ``redact`` (see jobs/serialize.py).

    ``checked`` says what was asked, of whom, and what it answered, or "not checked" (issue 35);
    ``retry`` what allowing a retry does and what is known against it."""
    evidence = redact(op.evidence or {})
    reported = evidence.get("source") == "caller_lookup"
    reconciler = registry.find(op.action, op.target)
    kind = registry.action_kind(op.action, op.target)
    checked = said.checked(evidence, kind, reconciler is not None)
    candidates = _candidates(evidence.get("candidates") or [], op)
    return {
        "operation_key": op.operation_key,
        "job_id": job_id,
        "task_version": op.task_version,
        "action": op.action,
        "target": op.target,
        "state": op.state,
        "request_summary": redact(op.request_summary),
        "request_hash": op.request_hash,
        "attempt": op.attempt,
        "last_error": redact(op.last_error),
        "reconcile_attempts": op.reconcile_attempts,
        "evidence": {k: v for k, v in evidence.items() if k != "candidates"},
        "candidates": candidates,
        "checked": checked,
        "retry": _retry(op, checked, candidates),
        "reported_by": (evidence.get("reported_by") or "a runner") if reported else None,
        "updated_at": iso(op.updated_at),
        # What "confirm" checks: the remote id is looked up through the reconciler, or (none for
        # this kind) it is recorded as entered, and the form says so.
        "verifiable": reconciler is not None and getattr(reconciler, "verifies", True),
        "has_reconciler": reconciler is not None,
        "kind": kind,
    }


def _retry(op, checked, candidates):
    """What "allow a retry" does, and what is known against it, in words."""
    against = [said.error_text(redact(op.last_error)),
               f"it was sent {op.attempt} time{'' if op.attempt == 1 else 's'}",
               f"{checked['of']} answered: {checked['answer']}" if checked["asked"] else "no lookup was made"]
    if candidates:
        against.append(f"{len(candidates)} candidate object{'' if len(candidates) == 1 else 's'} listed")
    if op.attempt < op.max_attempts:
        does = (f"Allowing a retry sends the request again: the next run dispatches attempt {op.attempt + 1} "
                f"of {op.max_attempts}.")
    else:
        does = (f"Allowing a retry marks it failed; all {op.max_attempts} attempts are used, so the next run halts "
                f"(retry_budget_exhausted) instead of sending it again.")
    return {"does": does, "against": against,
            "text": f"{does} Known against it: {'; '.join(against)}."}


def _candidates(found, op):
    """The reconciler's candidates, then the remote ids of receipts kept as evidence (another
    execution's, a fenced-out worker's: reconciliation/attempts.py) that it did not list already."""
    ids = {str(c.get("id")) for c in found if isinstance(c, dict)}
    return found + [c for c in redact(attempts.review_candidates(op)) if c["id"] not in ids]


def review_queue(tenant, job_id=None, limit=200):
    rows = review_store.review_queue_operations(tenant, QUEUE_STATES, job_id, limit)
    return [_item(op, op.job.job_id) for op in rows]


def review_item(tenant, key):
    op = get_operation(tenant, key)
    item = _item(op, op.job.job_id)
    item["decided_by"] = decided_by(store_approvals.approvals_for(op), store_approvals.denials_for(op)) \
        if op.requires_approval else []  # who approved what was sent
    item["events"] = [{"from": e.from_state, "to": e.to_state, "actor": e.actor, "detail": redact(e.detail),
                       "at": iso(e.created_at)}
                      for e in store.operation_events(op.id)]
    return item


def resolve(principal, key, decision, remote_id=None, note=None, expected_state=None):
    op = get_operation(principal.tenant, key)
    if op.state not in QUEUE_STATES + (S.SENT,):
        raise InvalidTransition(f"operation is {op.state}; nothing to review", {"state": op.state})
    if expected_state and op.state != expected_state:
        raise InvalidTransition(f"operation changed to {op.state} while you were deciding; reload it",
                                {"state": op.state, "expected": expected_state})
    now = time.time()
    if decision == "confirm":
        if remote_id in (None, ""):
            raise ValidationFailed("confirm needs the remote object's id", {"field": "remote_id"})
        reconciler = registry.find(op.action, op.target)
        verified = None
        if reconciler is not None:
            try:
                verified = reconciler.verify(op, remote_id)
            except ReconcilerError as exc:
                raise ValidationFailed(f"could not verify remote object {remote_id}: {exc}",
                                       {"field": "remote_id"}) from exc
            if not verified:
                raise ValidationFailed(f"remote object {remote_id} was not found for this job on the remote system",
                                       {"field": "remote_id", "remote_id": remote_id})
        fields = {"state": S.CONFIRMED, "remote_id": str(remote_id),
                  "receipt": {"resolved_by": principal.actor, "verified": verified, "note": note}}
    elif decision == "fail":
        fields = {"state": S.FAILED, "retryable": True,
                  "last_error": {"kind": "editor_failed", "reconciled": True, "note": note}}
    elif decision == "abandon":
        fields = {"state": S.ABANDONED}
    else:
        raise ValidationFailed("decision must be confirm, fail or abandon", {"field": "decision"})
    with write_txn():
        n = review_store.apply_review_decision(op.id, op.state, fields, now)
        if n != 1:
            raise InvalidTransition("operation changed while resolving; reload it", {})
        store.add_event(op.id, op.job_id, op.state, fields["state"], principal.actor, None,
                        {"review": decision, "note": note, "remote_id": remote_id}, now)
        audit(principal.tenant, op.job_id, principal.actor, "review_resolved",
              {"operation_key": key, "decision": decision, "remote_id": remote_id, "note": note,
               "from_state": op.state})
    return get_operation(principal.tenant, key)
