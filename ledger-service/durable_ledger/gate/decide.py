"""The gate's decision table, whole, as one pure function of the facts.

Nothing here reads the database or the clock: `facts.load` gathers the facts, `decide` maps
them to a `Decision`, and `begin` acts on it (claim, prepare, reconcile, refuse). Every row of
the table is a test case in tests/test_gate_decide.py. In order:

 1. the job is cancelled or halted                          -> halt (job's reason)
 2. a dispatch would happen (no row, PREPARED or FAILED) and
    a. a budget is used up                                  -> halt budget_exhausted
    b. a retryable failure failed recently (backoff)         -> halt backoff, retry_after
    c. an approval is needed and none is live: denied       -> halt approval_denied
                                              otherwise     -> halt approval_required (records PREPARED)
 3. no row                                                  -> claim a new operation (dispatch)
 4. by the row's state: PREPARED -> claim a retry (dispatch); CONFIRMED -> reuse_receipt;
    SENT/UNKNOWN -> reconcile; FAILED -> retry, or halt failed_permanently /
    retry_budget_exhausted; NEEDS_REVIEW -> needs_review; ABANDONED -> halt abandoned
 5. after a reconciler ran in this round (the second decision): no reconciler, busy or error
    -> reconcile with that reason; otherwise row 4 on the state the reconciler left

Row 2 is checked on the row as it was read: a retry that reconciliation just allowed (SENT ->
FAILED "reconciled absent") is the same attempt's request, already approved and counted when it
was first dispatched. The claims check status and budgets again under the job row's lock
(`store`), which is what makes rows 1 and 2a hold under concurrency; checked here first, the
common refusals cost no write.
"""

from dataclasses import dataclass, field

from ..kernel import states as S
from ..kernel.budgets import exhausted_budget

# What `begin` does with a decision (`Decision.act`).
CLAIM_NEW = "claim_new"
CLAIM_RETRY = "claim_retry"
PREPARE = "prepare"
RECONCILE = "reconcile"
NOTE_REUSE = "note_reuse"

# Reconciler outcomes that leave the operation as it was (reconciliation.py names them).
NO_RECONCILER = "no_reconciler"
BUSY = "busy"
ERROR = "error"


@dataclass(frozen=True)
class OpFacts:
    state: str
    retryable: bool | None
    attempt: int
    max_attempts: int
    updated_at: float
    reconciled_absent: bool = False  # FAILED because a reconciler found nothing at the remote


@dataclass(frozen=True)
class Facts:
    job_status: str
    halt_reason: str | None
    budget_used_up: str | None  # the first exhausted budget's name (deadline_s, max_cost, max_tool_calls)
    op: OpFacts | None
    approval_needed: bool
    approval_live: bool  # a live approval bound to this version, digest, target and policy
    denied: bool  # an approver's standing no for this digest
    now: float
    backoff_base_s: float = 0.0
    reconcile_allowed: bool = True
    reconciled: str | None = None  # the reconciler's outcome, on the second decision of a round


@dataclass(frozen=True)
class Decision:
    kind: str  # the wire decision: dispatch, reuse_receipt, reconcile, needs_review, halt
    reason: str | None = None
    act: str | None = None
    refusal: str | None = None  # the audit action recorded for a refusal
    budget: str | None = None
    retry_after: float | None = None
    use_approval: bool = False  # a dispatch that spends the live approval
    extras: dict = field(default_factory=dict)


def decide(f: Facts) -> Decision:
    if f.reconciled is not None:
        return _after_reconcile(f)
    if f.job_status in ("cancelled", "halted"):
        reason = f.halt_reason or f.job_status
        return Decision(S.HALT, reason, refusal="job_cancelled" if reason == "cancelled" else "job_halted")
    op = f.op
    if op is None or op.state in (S.PREPARED, S.FAILED):
        refused = _before_dispatch(f)
        if refused is not None:
            return refused
    use = f.approval_needed
    if op is None:
        return Decision(S.DISPATCH, act=CLAIM_NEW, use_approval=use)
    d = by_state(op.state, op.retryable, op.attempt, op.max_attempts)
    if d.kind == S.DISPATCH:
        return Decision(S.DISPATCH, act=CLAIM_RETRY, use_approval=use)
    if d.kind == S.RECONCILE and f.reconcile_allowed:
        return Decision(S.RECONCILE, d.reason, act=RECONCILE)
    return d


def _before_dispatch(f):
    """Rows 2a-2c: why a dispatch must not happen now, or None."""
    op = f.op
    if f.budget_used_up:
        return Decision(S.HALT, "budget_exhausted", refusal="budget_exhausted", budget=f.budget_used_up)
    if op is not None and op.state == S.FAILED and op.retryable and op.attempt < op.max_attempts \
            and not op.reconciled_absent:
        wait = backoff_remaining(op.attempt, op.updated_at, f.backoff_base_s, now=f.now)
        if wait > 0:
            return Decision(S.HALT, "backoff", retry_after=wait)
    if f.approval_needed and not f.approval_live:
        if f.denied:
            return Decision(S.HALT, "approval_denied", refusal="approval_denied")
        return Decision(S.HALT, "approval_required", refusal="approval_required",
                        act=PREPARE if op is None else None)
    return None


def _after_reconcile(f):
    """Row 5: the second decision, on the row the reconciler left."""
    if f.reconciled == NO_RECONCILER:
        reason = "outcome_unknown" if f.op.state == S.UNKNOWN else "in_flight"
        return Decision(S.RECONCILE, reason)
    if f.reconciled in (BUSY, ERROR):
        return Decision(S.RECONCILE, "reconcile_in_progress" if f.reconciled == BUSY else "reconcile_failed")
    op = f.op
    d = by_state(op.state, op.retryable, op.attempt, op.max_attempts)
    if d.kind == S.DISPATCH:
        return Decision(S.DISPATCH, act=CLAIM_RETRY)
    return d


def by_state(state, retryable, attempt, max_attempts):
    """Row 4: the decision for an operation that already has a row, from its state alone.

    ``dispatch`` here means "a new attempt may be claimed"; `begin` still has to win the
    conditional update that moves the row to SENT."""
    if state == S.PREPARED:
        return Decision(S.DISPATCH)
    if state == S.CONFIRMED:
        return Decision(S.REUSE_RECEIPT, act=NOTE_REUSE)
    if state in (S.SENT, S.UNKNOWN):
        return Decision(S.RECONCILE, "outcome_unknown" if state == S.UNKNOWN else "in_flight")
    if state == S.FAILED:
        if not retryable:
            return Decision(S.HALT, "failed_permanently")
        if attempt >= max_attempts:
            return Decision(S.HALT, "retry_budget_exhausted")
        return Decision(S.DISPATCH)
    if state == S.NEEDS_REVIEW:
        return Decision(S.NEEDS_REVIEW_DECISION, "awaiting_editor")
    if state == S.ABANDONED:
        return Decision(S.HALT, "abandoned")
    raise ValueError(f"unknown state {state!r}")


def backoff_remaining(attempt, failed_at, base_s, cap_s=300.0, *, now):
    """Seconds to wait before attempt+1 after a retryable failure (0: go now).

    The first retry is immediate (the common case is a one-off validation error fixed by the
    caller); later ones wait base * 2^(attempt-2), capped.
    """
    if base_s <= 0 or attempt < 2:
        return 0.0
    wait = min(base_s * (2 ** (attempt - 2)), cap_s)
    return max(0.0, round(failed_at + wait - now, 3))


# Budgets whose check reads rows other claims write (the dispatch count, the job's cost): a
# claim must hold the job row exclusively while it counts, or N concurrent claims all count
# the same "2 of 3 used" and all dispatch (see `budget_refusal`).
COUNTED = ("max_tool_calls", "max_cost")


def counted(budgets):
    return any((budgets or {}).get(k) is not None for k in COUNTED)


def budget_refusal(guard, now):
    """Rows 1 and 2a as the claims re-check them under the job row's lock, or None.

    ``guard`` is the job row read inside the claim's transaction (`store.JobGuard`): without
    the lock two windows stay open:

        begin A: job active, 2/3 calls ..................... INSERT SENT (3/3)
        begin B:        job active, 2/3 calls ......................... INSERT SENT (4/3)
        cancel:                  status=cancelled (commit)  ...  begin C (read before): INSERT SENT
    """
    if guard.status in ("cancelled", "halted"):
        return Refused(guard.halt_reason or guard.status)
    budget = exhausted_budget(guard.budgets, guard.cost, guard.created_at, guard.dispatches, now)
    return Refused("budget_exhausted", budget) if budget else None


class Refused:
    """The job may not dispatch now: cancelled/halted (``reason``) or a budget (``budget``)."""

    __slots__ = ("reason", "budget")

    def __init__(self, reason, budget=None):
        self.reason, self.budget = reason, budget

    def decision(self):
        if self.budget:
            return Decision(S.HALT, "budget_exhausted", refusal="budget_exhausted", budget=self.budget)
        return Decision(S.HALT, self.reason, refusal="job_cancelled" if self.reason == "cancelled" else "job_halted")
