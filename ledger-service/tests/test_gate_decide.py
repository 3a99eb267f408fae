"""Every row of the gate's decision table (gate/decide.py), as a pure function of facts.

Rows are numbered as in decide.py's docstring; `test_every_row_is_covered` fails when a row of
the table has no case here.
"""

from dataclasses import replace

import pytest

from durable_ledger.kernel import states as S
from durable_ledger.gate import decide as D

NOW = 1_000_000.0
BASE = D.Facts(job_status="active", halt_reason=None, budget_used_up=None, op=None, approval_needed=False,
               approval_live=False, denied=False, now=NOW, backoff_base_s=0.0, reconcile_allowed=True)


def op(state, retryable=None, attempt=1, max_attempts=3, updated_at=NOW, absent=False):
    return D.OpFacts(state, retryable, attempt, max_attempts, updated_at, absent)


def facts(**kw):
    return replace(BASE, **kw)


# (row, facts, expected kind, reason, act, extra expectations)
ROWS = [
    ("1 cancelled", facts(job_status="cancelled"), S.HALT, "cancelled", None, {"refusal": "job_cancelled"}),
    ("1 halted", facts(job_status="halted", halt_reason="authorization_revoked"), S.HALT, "authorization_revoked",
     None, {"refusal": "job_halted"}),
    ("1 halted over a confirmed row", facts(job_status="halted", op=op(S.CONFIRMED)), S.HALT, "halted", None,
     {"refusal": "job_halted"}),
    ("2a budget, no row", facts(budget_used_up="max_tool_calls"), S.HALT, "budget_exhausted", None,
     {"budget": "max_tool_calls", "refusal": "budget_exhausted"}),
    ("2a budget, failed row", facts(budget_used_up="deadline_s", op=op(S.FAILED, True)), S.HALT, "budget_exhausted",
     None, {"budget": "deadline_s"}),
    ("2a budget ignored for a confirmed row", facts(budget_used_up="max_cost", op=op(S.CONFIRMED)),
     S.REUSE_RECEIPT, None, D.NOTE_REUSE, {}),
    ("2b backoff", facts(backoff_base_s=10.0, op=op(S.FAILED, True, attempt=2, updated_at=NOW - 4)), S.HALT,
     "backoff", None, {"retry_after": 6.0}),
    ("2b backoff over", facts(backoff_base_s=10.0, op=op(S.FAILED, True, attempt=2, updated_at=NOW - 11)),
     S.DISPATCH, None, D.CLAIM_RETRY, {}),
    ("2b no backoff after reconciled absent",
     facts(backoff_base_s=10.0, op=op(S.FAILED, True, attempt=2, updated_at=NOW, absent=True)),
     S.DISPATCH, None, D.CLAIM_RETRY, {}),
    ("2c approval denied", facts(approval_needed=True, denied=True, op=op(S.PREPARED)), S.HALT, "approval_denied",
     None, {"refusal": "approval_denied"}),
    ("2c approval required, no row", facts(approval_needed=True), S.HALT, "approval_required", D.PREPARE,
     {"refusal": "approval_required"}),
    ("2c approval required, prepared row", facts(approval_needed=True, op=op(S.PREPARED)), S.HALT,
     "approval_required", None, {}),
    ("2c approved, no row", facts(approval_needed=True, approval_live=True), S.DISPATCH, None, D.CLAIM_NEW,
     {"use_approval": True}),
    ("2c approved, prepared row", facts(approval_needed=True, approval_live=True, op=op(S.PREPARED)), S.DISPATCH,
     None, D.CLAIM_RETRY, {"use_approval": True}),
    ("2c approval not asked for a sent row", facts(approval_needed=True, op=op(S.SENT)), S.RECONCILE, "in_flight",
     D.RECONCILE, {}),
    ("3 no row", facts(), S.DISPATCH, None, D.CLAIM_NEW, {"use_approval": False}),
    ("4 prepared", facts(op=op(S.PREPARED)), S.DISPATCH, None, D.CLAIM_RETRY, {}),
    ("4 confirmed", facts(op=op(S.CONFIRMED)), S.REUSE_RECEIPT, None, D.NOTE_REUSE, {}),
    ("4 sent", facts(op=op(S.SENT)), S.RECONCILE, "in_flight", D.RECONCILE, {}),
    ("4 unknown", facts(op=op(S.UNKNOWN)), S.RECONCILE, "outcome_unknown", D.RECONCILE, {}),
    ("4 sent, reconcile off", facts(op=op(S.SENT), reconcile_allowed=False), S.RECONCILE, "in_flight", None, {}),
    ("4 failed retryable", facts(op=op(S.FAILED, True)), S.DISPATCH, None, D.CLAIM_RETRY, {}),
    ("4 failed permanently", facts(op=op(S.FAILED, False)), S.HALT, "failed_permanently", None, {}),
    ("4 retries used up", facts(op=op(S.FAILED, True, attempt=3)), S.HALT, "retry_budget_exhausted", None, {}),
    ("4 needs review", facts(op=op(S.NEEDS_REVIEW)), S.NEEDS_REVIEW_DECISION, "awaiting_editor", None, {}),
    ("4 abandoned", facts(op=op(S.ABANDONED)), S.HALT, "abandoned", None, {}),
    ("5 no reconciler, sent", facts(op=op(S.SENT), reconciled=D.NO_RECONCILER), S.RECONCILE, "in_flight", None, {}),
    ("5 no reconciler, unknown", facts(op=op(S.UNKNOWN), reconciled=D.NO_RECONCILER), S.RECONCILE,
     "outcome_unknown", None, {}),
    ("5 busy", facts(op=op(S.SENT), reconciled=D.BUSY), S.RECONCILE, "reconcile_in_progress", None, {}),
    ("5 error", facts(op=op(S.SENT), reconciled=D.ERROR), S.RECONCILE, "reconcile_failed", None, {}),
    ("5 found", facts(op=op(S.CONFIRMED), reconciled="applied"), S.REUSE_RECEIPT, None, D.NOTE_REUSE, {}),
    ("5 absent", facts(op=op(S.FAILED, True, absent=True), reconciled="applied"), S.DISPATCH, None, D.CLAIM_RETRY,
     {}),
    ("5 absent skips the budget check (claim re-checks)",
     facts(op=op(S.FAILED, True, absent=True), reconciled="applied", budget_used_up="max_tool_calls"),
     S.DISPATCH, None, D.CLAIM_RETRY, {}),
    ("5 undecidable", facts(op=op(S.NEEDS_REVIEW), reconciled="applied"), S.NEEDS_REVIEW_DECISION,
     "awaiting_editor", None, {}),
    ("5 raced, still sent", facts(op=op(S.SENT), reconciled="raced"), S.RECONCILE, "in_flight", None, {}),
]


@pytest.mark.parametrize("row, f, kind, reason, act, extra", ROWS, ids=[r[0] for r in ROWS])
def test_decision_table(row, f, kind, reason, act, extra):
    d = D.decide(f)
    assert (d.kind, d.reason, d.act) == (kind, reason, act)
    for name, value in extra.items():
        assert getattr(d, name) == value, name


def test_every_row_is_covered():
    rows = {r[0].split()[0] for r in ROWS}
    assert rows == {"1", "2a", "2b", "2c", "3", "4", "5"}
    assert {r[1].op.state for r in ROWS if r[0].startswith("4 ")} == set(S.ALL_STATES)


def test_decide_is_pure():
    f = facts(op=op(S.FAILED, True, attempt=2, updated_at=NOW - 1), backoff_base_s=10.0)
    assert D.decide(f) == D.decide(f)


@pytest.mark.parametrize("status, budgets, cost, dispatches, expected", [
    ("cancelled", {}, 0, 0, ("cancelled", None)),
    ("halted", {}, 0, 0, ("halted", None)),
    ("active", {"max_tool_calls": 3}, 0, 3, ("budget_exhausted", "max_tool_calls")),
    ("active", {"max_tool_calls": 3}, 0, 2, None),
    ("active", {"max_cost": 1.0}, 1.0, 0, ("budget_exhausted", "max_cost")),
    ("active", {"deadline_s": 10}, 0, 0, ("budget_exhausted", "deadline_s")),
    ("active", {}, 0, 99, None),
])
def test_claim_recheck_under_the_lock(status, budgets, cost, dispatches, expected):
    from durable_ledger.store import JobGuard

    counted = []
    guard = JobGuard(status, None, budgets, cost, NOW - 20, lambda: counted.append(1) or dispatches)
    refused = D.budget_refusal(guard, NOW)
    assert (None if refused is None else (refused.reason, refused.budget)) == expected
    assert bool(counted) == ("max_tool_calls" in budgets and status == "active")  # counted only when needed


def test_unknown_state_is_refused():
    with pytest.raises(ValueError):
        D.decide(facts(op=op("BOGUS")))
