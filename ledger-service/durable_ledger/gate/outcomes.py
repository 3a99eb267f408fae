"""Outcome transitions of a dispatched step: confirm, fail, unknown, and the raw-result
classifier. The gate itself (`begin`) is in gate/run.py; the statements are in the store
(`store.transition`, `store.confirm`), with the fencing and state checks atomic with the write.
"""

import time

from .. import store
from ..jobs.operations import get_operation
from ..kernel import states as S
from ..kernel.errors import InvalidTransition, ReceiptConflict, ValidationFailed
from ..kernel.fencing import check_fence
from ..kernel.n8n_context import stamp
from ..reconciliation import attempts
from ..store import operations as op_store

# Which transitions a caller may request, from which states. Anything else is 409
# invalid_transition. Repeating a transition into the state an operation is already in is
# handled by the caller as an idempotent no-op.
ALLOWED = {
    "confirm": (S.SENT, S.UNKNOWN, S.NEEDS_REVIEW),  # late evidence also settles a review
    "fail": (S.SENT,),
    "unknown": (S.SENT,),
}


def _transition(principal, key, token, to_state, allowed_from, fields, detail=None):
    """Move ``key`` to ``to_state`` from one of ``allowed_from`` if ``token`` is current."""
    op = get_operation(principal.tenant, key)
    if op.state not in allowed_from:
        # A fenced-out caller hears that first: it was taken over, and the step moved on under
        # the new owner (kept_if_stale keeps its evidence). Only a current owner is told that the
        # transition itself is not allowed.
        lease = store.lease_of(op.job_id)
        if lease is not None and token is not None and token < lease.fencing_token:
            check_fence(lease, token)
        raise InvalidTransition(
            f"operation is {op.state}; cannot move it to {to_state}",
            {"state": op.state, "wanted": to_state, "allowed_from": list(allowed_from)},
        )
    store.transition(op, token, to_state, fields, principal.actor, stamp(detail), time.time())
    return get_operation(principal.tenant, key)


def confirm(principal, key, fencing_token, remote_id, receipt=None, cost=None):
    """The attempt's receipt: CONFIRMED. From another n8n execution than the one that dispatched
    the attempt, or with a stale token, the receipt is kept as evidence instead (reconciliation/attempts.py)."""
    execution = attempts.caller()
    if not cost and remote_id not in (None, ""):
        fast = store.confirm(principal.tenant, key, fencing_token, remote_id, receipt, principal.actor,
                             stamp({"remote_id": str(remote_id), "cost": None}), execution)
        if fast is not None:
            return fast
    op = get_operation(principal.tenant, key)
    if op.state == S.CONFIRMED:
        if str(op.remote_id) == str(remote_id):
            return op  # a retried confirm: same evidence, nothing to do
        raise ReceiptConflict(
            f"operation is already confirmed with remote id {op.remote_id}",
            {"stored_remote_id": op.remote_id, "given_remote_id": remote_id},
        )
    if remote_id in (None, ""):
        raise ValidationFailed("remote_id is required to confirm", {"field": "remote_id"})
    lease = store.lease_of(op.job_id)
    if lease is not None and fencing_token < lease.fencing_token and not cost \
            and attempts.own_answer(op, fencing_token, execution, remote_id):
        # Fenced out while its request was in flight, with the answer in hand: it settles the step.
        settled = attempts.settle_own(principal, op, fencing_token, remote_id, receipt)
        if settled is not None:
            return settled
        op = get_operation(principal.tenant, key)
    with attempts.kept_if_stale(principal, op, fencing_token, "confirm", remote_id, receipt):
        if attempts.foreign(op, execution) and op.state in ALLOWED["confirm"]:
            op = attempts.settle_foreign(principal, op, fencing_token, "confirm", remote_id, receipt)
        else:
            op = _transition(principal, key, fencing_token, S.CONFIRMED, ALLOWED["confirm"],
                             {"remote_id": str(remote_id), "receipt": receipt or {}, "last_error": None},
                             {"remote_id": str(remote_id), "cost": cost})
    if cost:
        op_store.add_job_cost(op.job_id, cost)
    return op


def confirm_many(principal, items):
    """Confirm ``items`` [(key, fencing_token, remote_id, receipt)] at once where the store can:
    {index: operation} for those confirmed; the rest are for `confirm`, one by one. A caller with
    an n8n execution id goes one by one: each receipt is checked against the attempt's execution."""
    if attempts.caller():
        return {}
    rows, seen = [], set()
    for i, (key, token, remote_id, receipt) in enumerate(items):
        if remote_id not in (None, "") and key not in seen:  # a repeated key: after the first, one by one
            rows.append((i, key, str(remote_id), receipt, token))
        seen.add(key)
    return store.confirm_many(principal.tenant, rows, principal.actor, stamp({"cost": None}))


def fail(principal, key, fencing_token, retryable=True, error=None, halt_reason=None):
    op = get_operation(principal.tenant, key)
    if op.state == S.FAILED and op.fencing_token == fencing_token:
        return op
    with attempts.kept_if_stale(principal, op, fencing_token, "fail", error=error):
        if attempts.foreign(op, attempts.caller()) and op.state in ALLOWED["fail"]:
            # Not FAILED: the attempt's own execution may have written before it died, and a
            # retry after FAILED would write again.
            op = attempts.settle_foreign(principal, op, fencing_token, "fail", error=error)
        else:
            op = _transition(principal, key, fencing_token, S.FAILED, ALLOWED["fail"],
                             {"retryable": bool(retryable), "last_error": error or {}},
                             {"retryable": bool(retryable), "error": error})
    if halt_reason:
        halt_job(principal, op.job_id, halt_reason, {"operation_key": key, "error": error})
    return op


def mark_unknown(principal, key, fencing_token, error=None):
    op = get_operation(principal.tenant, key)
    with attempts.kept_if_stale(principal, op, fencing_token, "unknown", error=error):
        if attempts.foreign(op, attempts.caller()) and op.state in ALLOWED["unknown"]:
            return attempts.settle_foreign(principal, op, fencing_token, "unknown", error=error)
        if op.state == S.UNKNOWN:
            return op
        return _transition(principal, key, fencing_token, S.UNKNOWN, ALLOWED["unknown"],
                           {"last_error": error or {}}, {"error": error})


def record_outcome(principal, key, fencing_token, http_status=None, error_kind=None, remote_id=None,
                   receipt=None, error=None, cost=None):
    """Classify a raw result (docs/api.md) and apply it. Returns (classification, operation)."""
    kind = S.classify_outcome(http_status, error_kind, remote_id)
    err = dict(error or {})
    err.setdefault("http_status", http_status)
    if error_kind:
        err.setdefault("kind", error_kind)
    if kind == "confirm":
        return kind, confirm(principal, key, fencing_token, remote_id, receipt, cost)
    if kind == "fail":
        return kind, fail(principal, key, fencing_token, True, err)
    if kind == "fail_halt":
        return kind, fail(principal, key, fencing_token, False, err, halt_reason="authorization_revoked")
    return kind, mark_unknown(principal, key, fencing_token, err)


def halt_job(principal, job_pk, reason, detail=None):
    op_store.halt_job_on_outcome(principal.tenant, job_pk, principal.actor, reason, detail, time.time())
