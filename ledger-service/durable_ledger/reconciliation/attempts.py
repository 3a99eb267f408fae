"""An attempt belongs to the n8n execution that began it; other receipts are evidence.

The fencing token says which worker may act for a job; it cannot tell two n8n executions of one
worker apart. The window that leaves open (n8n's "Save Execution Progress" on):

    execution 10: Start Job (token 4), Begin Step: SENT (dispatched_by 10), write ... kill -9
    remote:                                                         order #1 committed
    Retry of 10 = execution 12: resumes after Begin Step (its saved output, token 4 still
                  current), writes again (order #2), Record Outcome: confirm with token 4

So the claim records the execution that dispatched the attempt (`Operation.dispatched_by`, the
id its SENT event names) and an outcome reported by another execution does not settle it: the
operation goes to reconciliation (UNKNOWN when a reconciler can ask the remote, NEEDS_REVIEW
when nothing can decide) with the receipt kept as evidence. Callers without an execution id
(Python clients, curl) are bound by the fencing token alone, as before.

A fenced-out worker's receipt (its token is stale: another execution took the job over while it
was writing) settles the step when it is the answer of the attempt in flight (`settle_own`): the
same attempt, dispatched under that token by that execution, confirmed with a remote id. The
fencing token keeps a stale holder from *starting* anything; the answer to a request it sent while
it held the lease is the attempt's own outcome, and nobody else has it:

    execution 10: Start Job (token 4), begin: SENT (attempt 1, by 10), POST ... (1.5 s) ......
    execution 11: Start Job: takes over (token 5), begin: SENT, outcome unknown -> looks up
    remote:                                                              order #1 committed
    execution 10: confirm(token 4, #1): same attempt, same execution -> CONFIRMED
    execution 11: begin again / next run: Done Before (#1); nobody reviews an order made right

Any other stale report (a failure, an unknown, an older attempt's late receipt, another
execution's) is kept as evidence, never as authority: the new owner's reconciliation verifies it
with the remote (`owner_receipts`), and the review queue shows it as the candidate remote id
(`review_candidates`), so a known outcome never needs a person to find it again.
"""

import time
from contextlib import contextmanager

from .. import store
from ..kernel import states as S
from ..kernel.errors import InvalidTransition, StaleFencingToken
from ..kernel.n8n_context import current, stamp
from ..store import operations as op_store
from ..store.audit import audit
from ..store.db import write_txn
from . import registry

MISMATCH = "execution_mismatch"
STALE = "stale_fencing_token"
MAX_KEPT = 20  # receipts kept on one operation; the events keep every one
ROUNDS = 3


def caller():
    """The n8n execution id of the current request, or None."""
    return (current() or {}).get("execution_id")


def foreign(op, execution_id):
    """Was the attempt dispatched by another n8n execution than ``execution_id``?"""
    dispatched_by = getattr(op, "dispatched_by", None)
    return bool(execution_id and dispatched_by and execution_id != dispatched_by)


def receipts(op):
    """The receipts kept on ``op`` as evidence (oldest first)."""
    evidence = op.evidence if isinstance(op.evidence, dict) else {}
    kept = evidence.get("receipts")
    return [r for r in kept if isinstance(r, dict)] if isinstance(kept, list) else []


def with_receipts(op, evidence):
    """A reconciliation's ``evidence`` with the receipts kept on ``op``: a verdict replaces the
    evidence, never the receipts."""
    kept = receipts(op)
    return {**evidence, "receipts": kept} if kept else evidence


def _entry(kind, standing, op, token, remote_id, receipt, error, now):
    execution_id = caller()
    return {"kind": kind, "standing": standing, "execution_id": execution_id,
            "dispatched_by": getattr(op, "dispatched_by", None), "attempt": op.attempt, "fencing_token": token,
            # The attempt in flight was dispatched under this token by this execution: the receipt
            # is that attempt's (an older attempt's late receipt is not).
            "current_attempt": token == op.fencing_token and not foreign(op, execution_id),
            "remote_id": None if remote_id in (None, "") else str(remote_id),
            "receipt": receipt or None, "error": error or None, "at": now}


def _same(a, b):
    fields = ("kind", "standing", "execution_id", "remote_id", "fencing_token", "attempt")
    return all(a.get(f) == b.get(f) for f in fields)


def _kept(op, entry):
    """(the receipts with ``entry`` added, whether it is new): a retried call adds nothing."""
    kept = receipts(op)
    if any(_same(r, entry) for r in kept):
        return kept, False
    return (kept + [entry])[-MAX_KEPT:], True


def settle_foreign(principal, op, token, kind, remote_id=None, receipt=None, error=None):
    """An outcome (``kind`` confirm, fail or unknown) from another execution than the attempt's:
    the operation goes to reconciliation with the receipt kept. Fenced like any transition (a
    stale token raises). Returns the operation with ``binding`` set (`answer_of`)."""
    for _ in range(ROUNDS):
        now = time.time()
        entry = _entry(kind, MISMATCH, op, token, remote_id, receipt, error, now)
        to_state = S.UNKNOWN if op.state != S.NEEDS_REVIEW and registry.find(op.action, op.target) else S.NEEDS_REVIEW
        kept, new = _kept(op, entry)
        binding = {"standing": MISMATCH, "dispatched_by": entry["dispatched_by"], "reported_by": entry["execution_id"],
                   "receipt_kept": True}
        if not new and op.state in (S.UNKNOWN, S.NEEDS_REVIEW):  # a retried call: kept already
            op.binding = binding
            return op
        last_error = {"kind": MISMATCH, "dispatched_by": op.dispatched_by, "reported_by": entry["execution_id"],
                      "reported": kind, "remote_id": entry["remote_id"]}
        try:
            store.transition(op, token, to_state, {"evidence": {**(op.evidence or {}), "receipts": kept},
                                                   "last_error": last_error},
                             principal.actor, stamp({"reason": MISMATCH, "receipt_kept": entry}), now)
        except InvalidTransition:
            # Another report moved it first (a second foreign receipt, a reconciler): read again.
            op = store.get_operation(principal.tenant, op.operation_key)
            if op.state not in S.NEEDS_ATTENTION:
                raise
            continue
        settled = store.get_operation(principal.tenant, op.operation_key)
        settled.binding = binding
        return settled
    raise InvalidTransition("the operation kept changing while the receipt was kept; send it again",
                            {"state": op.state})


def keep_stale(principal, op, token, kind, remote_id=None, receipt=None, error=None):
    """Keep a fenced-out caller's receipt on ``op`` as evidence: no state changes. Recorded in the
    audit log (`receipt_kept`), not as an operation event: the state does not move, and an event
    into SENT would count as a dispatch (`store.count_dispatches`)."""
    now = time.time()
    entry = _entry(kind, STALE, op, token, remote_id, receipt, error, now)
    with write_txn():
        cur = store.operation_locked(op.id)
        kept, new = _kept(cur, entry)
        if new:
            op_store.set_kept_receipts(op.id, {**(cur.evidence or {}), "receipts": kept})
            audit(principal.tenant, op.job_id, principal.actor, "receipt_kept",
                  stamp({"operation_key": op.operation_key, "reason": STALE, "state": cur.state,
                         "remote_id": entry["remote_id"], "receipt_kept": entry}))
    return entry


SETTLES = (S.SENT, S.UNKNOWN, S.NEEDS_REVIEW)


def own_answer(op, token, execution_id, remote_id):
    """Is this confirm the answer of the attempt in flight, from the caller that dispatched it
    (under ``token``, by ``execution_id``), whatever happened to the lease since?"""
    return (op.state in SETTLES and token is not None and token == op.fencing_token
            and not foreign(op, execution_id) and remote_id not in (None, ""))


def settle_own(principal, op, token, remote_id, receipt=None):
    """The attempt's own receipt after a takeover: CONFIRMED under the token it was dispatched
    with (the lease fence is not asked; the state and attempt the row was read in are). Returns
    the operation, or None when it moved meanwhile (the caller answers as before)."""
    detail = stamp({"remote_id": str(remote_id), "reason": "own_answer_after_takeover",
                    "dispatched_by": getattr(op, "dispatched_by", None)})
    try:
        store.transition(op, token, S.CONFIRMED, {"remote_id": str(remote_id), "receipt": receipt or {},
                                                  "last_error": None},
                         principal.actor, detail, time.time(), fenced=False)
    except InvalidTransition:
        return None
    return store.get_operation(principal.tenant, op.operation_key)


@contextmanager
def kept_if_stale(principal, op, token, kind, remote_id=None, receipt=None, error=None):
    """Around an outcome's transition: a stale token still refuses it (409 stale_fencing_token),
    and the receipt is kept first; the refusal says so (``details.receipt_kept``)."""
    try:
        yield
    except StaleFencingToken as exc:
        if op.state in S.NEEDS_ATTENTION:
            entry = keep_stale(principal, op, token, kind, remote_id, receipt, error)
            exc.details.update(receipt_kept=True, operation_key=op.operation_key, state=op.state,
                               remote_id=entry["remote_id"])
        raise


def owner_receipts(op):
    """Receipts a reconciler may verify for the attempt in flight: sent by the execution that
    dispatched it, under its token, after it was fenced out (defect 11's known outcome)."""
    return [r for r in receipts(op) if r.get("standing") == STALE and r.get("current_attempt")
            and r.get("attempt") == op.attempt and r.get("remote_id") and r.get("kind") == "confirm"]


def review_candidates(op):
    """The kept receipts' remote ids as candidates for the review item (an editor confirms one
    with a click; the ledger verifies it where a reconciler can). Labelled as the caller's."""
    out = []
    for r in receipts(op):
        if not r.get("remote_id") or r.get("attempt") != op.attempt:
            continue
        who = f"n8n execution {r['execution_id']}" if r.get("execution_id") else "a caller"
        why = ("after it was fenced out (stale token)" if r.get("standing") == STALE
               else f"which did not dispatch this attempt (execution {r.get('dispatched_by')} did)")
        out.append({"id": r["remote_id"], "match": f"receipt sent by {who} {why}", "source": "caller_receipt",
                    "standing": r.get("standing"), "execution_id": r.get("execution_id")})
    return out


def answer_of(op):
    """What an outcome answer adds for a receipt that did not settle the attempt, or {}."""
    binding = getattr(op, "binding", None)
    if not binding:
        return {}
    decision = S.RECONCILE if op.state == S.UNKNOWN else S.NEEDS_REVIEW_DECISION
    return {"decision": decision, "reason": MISMATCH, "message": S.MESSAGES[MISMATCH], "attempt_binding": binding}
