"""Reconcile one SENT/UNKNOWN operation: ask the remote, then move the state on evidence only.

Guarded twice:
- one reconciler run per operation at a time: a claim (`reconciling_until`) taken by a
  conditional UPDATE; a second caller gets "busy" and the operation is left alone;
- the verdict is applied with a conditional UPDATE on the state we observed, so a confirm
  that arrives while we were asking (the late response of the original call) wins and the
  verdict is dropped.
A reconciler error (network, 5xx) changes nothing but the evidence: UNKNOWN is never
promoted to FAILED because the remote could not be asked.
"""

import time

from .. import store
from ..kernel import states as S
from ..kernel.n8n_context import stamp
from ..store import operations as op_store
from ..store.db import write_txn
from . import attempts, registry
from .verdicts import Absent, Found, ReconcilerError, Undecidable

BUSY, ERROR, APPLIED, RACED, NO_RECONCILER = "busy", "error", "applied", "raced", "no_reconciler"


def _claim(op, claim_s, now):
    return op_store.claim_for_reconcile(op.id, claim_s, now)


def _release(op):
    op_store.release_reconcile_claim(op.id)


def _event(op, to_state, actor, detail, now):
    store.add_event(op.id, op.job_id, op.state, to_state, actor, None, stamp(detail), now)


def reconcile_operation(op, actor, claim_s=60.0, escalate=True):
    """Returns (outcome, verdict_kind, operation). outcome in busy/error/applied/raced/no_reconciler.

    Without a registered reconciler nothing can be asked: with ``escalate`` (the sweeper, an
    explicit reconcile request) the operation goes to an editor; without it (the gate, which may
    run while the original call is still in flight) it is left as it is.
    """
    now = time.time()
    if op.state not in S.IN_FLIGHT:
        return APPLIED, None, op
    reconciler = registry.find(op.action, op.target)
    if reconciler is None and not escalate:
        return NO_RECONCILER, None, op
    if not _claim(op, claim_s, now):
        return BUSY, None, op_store.reread_operation(op.id)
    try:
        if reconciler is None:
            kind = registry.action_kind(op.action, op.target)
            # Nothing was asked: the evidence says so, so that no page reports "reconciled".
            verdict = Undecidable({"detail": f"no reconciler for '{kind}'; nothing was asked; an editor must decide",
                                   "no_reconciler": kind})
            outcome = NO_RECONCILER
        else:
            verdict = with_kept_receipt(reconciler, op, reconciler.lookup(op))
            outcome = APPLIED
    except (ReconcilerError, ValueError) as exc:
        with write_txn():
            tried = {"error": str(exc), "at": now, "reconciler": getattr(reconciler, "name", type(reconciler).__name__)}
            op_store.record_reconcile_error(op.id, attempts.with_receipts(op, tried), now)
            _event(op, op.state, actor, {"reconcile_error": str(exc)}, now)
        return ERROR, None, op_store.reread_operation(op.id)
    except Exception:
        _release(op)
        raise
    n, to_state = apply_verdict(op, verdict, actor, now)
    if n != 1:
        _release(op)
        return RACED, verdict.kind, op_store.reread_operation(op.id)
    return outcome, verdict.kind, op_store.reread_operation(op.id)


def with_kept_receipt(reconciler, op, verdict):
    """The lookup's verdict, weighed against a receipt the attempt's own execution sent after it
    was fenced out (reconciliation/attempts.py): a lookup that found nothing does not outvote it.

        worker A: begin (token 4), write ......................... confirm (token 4): stale, kept
        worker B:          take over (token 5), begin: reconcile ...... begin again: lookup

    Absent or undecidable while such a receipt exists: the reconciler verifies the receipt's
    remote id (found: CONFIRMED without a person); not verified: an editor decides, with the id as
    the candidate. Never FAILED, whose retry would write a second time."""
    kept = attempts.owner_receipts(op)
    if isinstance(verdict, Found) or not kept:
        return verdict
    for r in reversed(kept):
        if reconciler.verify(op, r["remote_id"]):
            return Found(r["remote_id"], r.get("receipt") or {},
                         {"source": "kept_receipt", "verified_by": "reconciler", "execution_id": r.get("execution_id"),
                          "lookup": verdict.kind})
    return Undecidable({**dict(verdict.evidence), "detail": "the lookup found nothing, but the attempt's own "
                                                         "execution reported a remote id the reconciler could not verify"})


def verdict_transition(verdict):
    """(to_state, fields) for a verdict: the one place that says what found / absent / undecidable mean.

    found -> CONFIRMED with the remote id; a definitive absent -> FAILED, retryable, marked
    `reconciled` (the next begin dispatches without backoff); anything else -> NEEDS_REVIEW.
    """
    evidence = dict(verdict.evidence)
    if isinstance(verdict, Found):
        return S.CONFIRMED, {"remote_id": verdict.remote_id, "receipt": verdict.receipt, "evidence": evidence}
    if isinstance(verdict, Absent) and verdict.definitive:
        evidence["verdict"] = verdict.kind  # what was answered, for the timeline and the review item
        return S.FAILED, {"retryable": True, "evidence": evidence,
                          "last_error": {"kind": "absent", "reconciled": True, "detail": evidence.get("detail")}}
    evidence["candidates"] = list(getattr(verdict, "candidates", []) or [])
    evidence["verdict"] = verdict.kind + ("" if getattr(verdict, "definitive", True) else " (not definitive)")
    return S.NEEDS_REVIEW, {"evidence": evidence}


def apply_verdict(op, verdict, actor, now, attempt=None, before_txn=None):
    """Apply ``verdict`` to ``op`` if it is still in the state (and attempt) we observed.

    Returns (rows updated, to_state). ``attempt`` (when given) must also still be the operation's;
    ``before_txn`` runs first inside the write transaction (the lookup route checks the fence
    there, as confirm does).
    """
    to_state, fields = verdict_transition(verdict)
    fields["evidence"] = attempts.with_receipts(op, fields["evidence"])
    with write_txn():
        if before_txn is not None:
            before_txn()
        n = op_store.apply_verdict_fields(op.id, op.state, to_state, fields, now, attempt=attempt)
        if n == 1:
            _event(op, to_state, actor, {"reconciled": verdict.kind, **{k: v for k, v in fields["evidence"].items()
                                                                        if k not in ("candidates", "receipts")}}, now)
    return n, to_state
