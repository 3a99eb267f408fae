"""Every row of the gate's decision table and the outcome classification, as pure functions."""

import pytest

from durable_ledger.kernel import states as S
from durable_ledger.gate.decide import by_state


def decide_existing(state, retryable, attempt, max_attempts):
    d = by_state(state, retryable, attempt, max_attempts)
    return d.kind, d.reason


@pytest.mark.parametrize(
    "state, retryable, attempt, max_attempts, expected",
    [
        (S.PREPARED, None, 1, 3, (S.DISPATCH, None)),
        (S.CONFIRMED, None, 1, 3, (S.REUSE_RECEIPT, None)),
        (S.SENT, None, 1, 3, (S.RECONCILE, "in_flight")),
        (S.UNKNOWN, None, 1, 3, (S.RECONCILE, "outcome_unknown")),
        (S.FAILED, True, 1, 3, (S.DISPATCH, None)),
        (S.FAILED, True, 3, 3, (S.HALT, "retry_budget_exhausted")),
        (S.FAILED, False, 1, 3, (S.HALT, "failed_permanently")),
        (S.NEEDS_REVIEW, None, 1, 3, (S.NEEDS_REVIEW_DECISION, "awaiting_editor")),
        (S.ABANDONED, None, 1, 3, (S.HALT, "abandoned")),
    ],
)
def test_decide_existing_table(state, retryable, attempt, max_attempts, expected):
    assert decide_existing(state, retryable, attempt, max_attempts) == expected


def test_decide_existing_rejects_unknown_state():
    with pytest.raises(ValueError):
        decide_existing("BOGUS", None, 1, 3)


@pytest.mark.parametrize(
    "status, kind, remote_id, expected",
    [
        (201, None, 101, "confirm"),
        (200, None, "abc", "confirm"),
        (200, None, None, "unknown"),  # 2xx without an id proves nothing about what was created
        (400, None, None, "fail"),
        (422, None, None, "fail"),
        (401, None, None, "fail_halt"),
        (403, None, None, "fail_halt"),
        (409, None, None, "unknown"),
        (500, None, None, "unknown"),
        (503, None, None, "unknown"),
        (None, "timeout", None, "unknown"),
        (None, "connection_reset", None, "unknown"),
        (None, "connection_refused", None, "fail"),
        (None, None, None, "unknown"),
    ],
)
def test_classify_outcome(status, kind, remote_id, expected):
    assert S.classify_outcome(status, kind, remote_id) == expected


def test_every_state_has_a_decision():
    for state in S.ALL_STATES:
        decision, _ = decide_existing(state, True, 1, 3)
        assert decision in (S.DISPATCH, S.REUSE_RECEIPT, S.RECONCILE, S.NEEDS_REVIEW_DECISION, S.HALT)
