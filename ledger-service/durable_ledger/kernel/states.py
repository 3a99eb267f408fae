"""Operation states, the gate's decision names and messages, and the outcome classifier.

The decision table itself is gate/decide.py; docs/architecture.md draws the layers and the path of a begin."""

PREPARED = "PREPARED"
SENT = "SENT"
CONFIRMED = "CONFIRMED"
FAILED = "FAILED"
UNKNOWN = "UNKNOWN"
NEEDS_REVIEW = "NEEDS_REVIEW"
ABANDONED = "ABANDONED"

ALL_STATES = (PREPARED, SENT, CONFIRMED, FAILED, UNKNOWN, NEEDS_REVIEW, ABANDONED)
IN_FLIGHT = (SENT, UNKNOWN)
NEEDS_ATTENTION = (SENT, UNKNOWN, NEEDS_REVIEW)

DISPATCH = "dispatch"
REUSE_RECEIPT = "reuse_receipt"
RECONCILE = "reconcile"
NEEDS_REVIEW_DECISION = "needs_review"
HALT = "halt"

MESSAGES = {
    "in_flight": "A previous attempt was sent and its outcome was never recorded; the ledger must reconcile with the remote system before anything is retried.",
    "outcome_unknown": "The outcome of the previous attempt is unknown; reconcile with the remote system (or wait for an editor) before retrying.",
    "failed_permanently": "The previous attempt failed with an error that retrying cannot fix.",
    "retry_budget_exhausted": "The previous attempts failed and the retry budget is used up.",
    "awaiting_editor": "Reconciliation could not decide; an editor must resolve this operation in the review queue.",
    "abandoned": "An editor decided this side effect must not be done.",
    "approval_required": "This step needs a live approval bound to this version, content, target and action.",
    "approval_denied": "An approver denied this step for this content (see denial.reason); nothing is dispatched unless it is approved later.",
    "cancelled": "The job was cancelled; nothing is dispatched for it any more.",
    "authorization_revoked": "The remote system refused our credentials; the job is halted until re-authorised.",
    "policy_changed": "The job's policy (tools, scopes) changed since it was approved; it is halted until re-approved.",
    "reconcile_in_progress": "Another caller is reconciling this operation right now; ask again shortly.",
    "reconcile_failed": "The remote system could not be asked (network or server error); the operation stays as it was. Try again later.",
    "backoff": "The previous attempt failed recently; wait retry_after seconds before the next one.",
    "execution_mismatch": "This outcome was reported by another n8n execution than the one that dispatched the attempt (n8n's Retry of an execution runs as a new one, and may have written a second time): it is kept as evidence, and the operation is reconciled instead of settled.",
}


# A transport failure the caller reports instead of a status: the first two may have happened
# after the remote wrote, the last two before anything was sent.
MAYBE_SENT_ERRORS = ("timeout", "connection_reset")
NOT_SENT_ERRORS = ("connection_refused", "dns")
ERROR_KINDS = MAYBE_SENT_ERRORS + NOT_SENT_ERRORS


def classify_outcome(http_status=None, error_kind=None, remote_id=None):
    """Map a side effect's result to confirm / fail / fail_halt / unknown (docs/api.md, "Record Outcome").

    ``error_kind`` is one of timeout, connection_reset, connection_refused, dns or None.
    A refused connection or DNS failure happened before anything was sent, so it is a
    retryable failure; a timeout or reset may have happened after the remote wrote.
    """
    if error_kind in MAYBE_SENT_ERRORS:
        return "unknown"
    if error_kind in NOT_SENT_ERRORS:
        return "fail"
    if http_status is None:
        return "unknown"
    if 200 <= http_status < 300:
        return "confirm" if remote_id not in (None, "") else "unknown"
    if http_status in (401, 403):
        return "fail_halt"
    if http_status == 409 or http_status >= 500 or http_status == 408:
        return "unknown"
    if http_status in (400, 404, 413, 415, 422):
        return "fail"
    return "unknown"
