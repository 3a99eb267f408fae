"""What the client raises. Ledger refusals are the ledger's own classes (durable_ledger.kernel.errors)
on both transports; the rest are the client's: a gate that said "not now", a body that said
"nothing was sent", a body that forgot to confirm, a ledger that could not be reached."""

from ..kernel import errors as ledger_errors
from ..kernel.errors import LedgerError


class StepBlocked(Exception):
    """The gate did not answer dispatch or reuse_receipt: the body must not run.

    ``decision`` is reconcile, needs_review or halt; ``reason`` the ledger's reason code
    (cancelled, approval_required, in_flight, ...); ``details`` the rest of the answer
    (retry_after, budget, denial, reconciliation)."""

    def __init__(self, decision, reason, message, operation_key, details=None):
        super().__init__(f"{decision}: {message or reason or 'the gate did not allow this step'}")
        self.decision, self.reason, self.message = decision, reason, message
        self.operation_key = operation_key
        self.details = details or {}

    @property
    def retry_after(self):
        return self.details.get("retry_after")


class NeedsReconcile(StepBlocked):
    """SENT or UNKNOWN: an earlier attempt may have happened; reconcile before anything else."""


class NeedsReview(StepBlocked):
    """Reconciliation could not decide: an editor resolves it in the review queue."""


class Halted(StepBlocked):
    """The job or the operation is stopped (cancelled, budget, approval, failed for good...)."""


BLOCKED = {"reconcile": NeedsReconcile, "needs_review": NeedsReview, "halt": Halted}


class NotSent(Exception):
    """Raise inside a step to say the side effect was certainly not performed: the step is
    recorded FAILED (``retryable`` decides whether the gate dispatches it again)."""

    def __init__(self, message="the side effect was not sent", retryable=True, error=None):
        super().__init__(message)
        self.retryable = retryable
        self.error = error


class ConfirmForgotten(RuntimeError):
    """A dispatched step's block ended without confirm() or fail(): it is recorded UNKNOWN."""


class StepUsageError(RuntimeError):
    """confirm/fail/unknown called on a step that is not waiting for its outcome."""


class LedgerUnavailable(LedgerError):
    """The ledger could not be asked (connection refused, timeout, a proxy's 5xx, database down).
    Whether the last call took effect is unknown: the next begin answers from what it left."""

    code, http_status = "ledger_unavailable", 503


def _classes(base=LedgerError):
    for cls in base.__subclasses__():
        yield cls
        yield from _classes(cls)


def _by_code():
    # The ledger's own module first: where another module reuses a code, its class wins.
    table = {}
    for cls in [c for c in _classes() if c.__module__ == ledger_errors.__name__] + list(_classes()):
        table.setdefault(cls.code, cls)
    return table


def error_from_http(status, body):
    """The LedgerError an HTTP error answer stands for: its class by code when one is known here,
    else a LedgerError carrying the code and status it came with."""
    err = body.get("error") if isinstance(body, dict) else None
    if not isinstance(err, dict) or not err.get("code"):
        exc = LedgerUnavailable(f"the ledger answered HTTP {status} without an error body", {"http_status": status})
        return exc
    code, message, details = err["code"], err.get("message") or err["code"], err.get("details") or {}
    cls = _by_code().get(code)
    exc = (cls or LedgerError)(message, details)
    if cls is None:
        exc.code = code
    exc.http_status = status
    return exc
