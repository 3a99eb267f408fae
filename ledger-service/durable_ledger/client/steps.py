"""A job's steps: `with job.step(...) as step` and the `@job.gated(...)` decorator.

The body runs only when the gate answered dispatch; when it answered reuse_receipt the step is
`done` and carries the stored receipt. Leaving the block records what is known and nothing
more: confirmed stays confirmed, NotSent becomes FAILED, any other exception (the side effect
may have happened) becomes UNKNOWN, and a block that ends without an outcome becomes UNKNOWN
and raises ConfirmForgotten. The next run's begin then reconciles instead of repeating.
"""

import functools
import inspect
import logging

from ..kernel.secrets import redact_text
from .errors import ConfirmForgotten, NotSent, StepUsageError

log = logging.getLogger("durable_ledger.client")

NEW, DISPATCHED, REUSED, CONFIRMED, FAILED, UNKNOWN = "new", "dispatched", "reused", "confirmed", "failed", "unknown"
MAX_ERROR_TEXT = 500


def error_of(exc, **extra):
    """What the ledger stores about an exception: its class and its message with anything that
    looks like a credential redacted (and cut short). Never the traceback or the arguments."""
    out = {"type": type(exc).__name__, "message": redact_text(str(exc))[:MAX_ERROR_TEXT],
           "recorded_by": "durable_ledger.client", **extra}
    if exc.__cause__ is not None:
        out["cause"] = type(exc.__cause__).__name__
    return out


class Step:
    """One gated side effect. Use it as a context manager (begin runs on entry)."""

    def __init__(self, job, action, payload, operation_key=None, target=None, requires_approval=False,
                 approval_policy=None):
        self.job, self.action, self.payload = job, action, payload
        self.operation_key, self.target, self.requires_approval = operation_key, target, requires_approval
        self.approval_policy = approval_policy
        self.state, self.answer, self.operation = NEW, None, None

    @property
    def done(self):
        """True when the side effect already happened (reuse_receipt): do not do it again."""
        return self.state == REUSED

    @property
    def receipt(self):
        return self.answer.receipt if self.answer is not None else None

    @property
    def attempt(self):
        return self.answer.attempt if self.answer is not None else None

    @property
    def decision(self):
        return self.answer.decision if self.answer is not None else None

    def __enter__(self):
        if self.state != NEW:
            raise StepUsageError("a step is entered once; call job.step(...) again for another run")
        job = self.job
        answer = job.ledger._begin(job.job_id, self.action, job.fencing_token, self.payload,
                                   self.operation_key, self.target, self.requires_approval, self.approval_policy)
        self.answer, self.operation_key = answer, answer.operation_key or self.operation_key
        if answer.decision == "dispatch":
            self.state = DISPATCHED
        elif answer.decision == "reuse_receipt":
            self.state = REUSED
        else:
            raise answer.blocked()
        return self

    def _outcome(self, kind, new_state, **fields):
        if self.state != DISPATCHED:
            raise StepUsageError(f"the step is {self.state}; only a dispatched step takes an outcome")
        job = self.job
        self.operation = job.ledger._outcome(kind, job.job_id, self.operation_key, job.fencing_token, **fields)
        self.state = new_state
        return self.operation

    def confirm(self, remote_id, receipt=None, cost=None):
        """The side effect happened: ``remote_id`` names what it created, ``receipt`` is what a
        later run gets back instead of doing it again."""
        return self._outcome("confirm", CONFIRMED, remote_id=remote_id, receipt=receipt or {}, cost=cost)

    def fail(self, retryable=True, error=None):
        """The side effect was certainly not performed (``retryable``: the gate may dispatch again)."""
        return self._outcome("fail", FAILED, retryable=bool(retryable), error=error or {})

    def unknown(self, error=None):
        """It may or may not have happened: the next begin reconciles."""
        return self._outcome("unknown", UNKNOWN, error=error or {})

    def outcome(self, http_status=None, error_kind=None, remote_id=None, receipt=None, error=None, cost=None):
        """Report the raw result (an HTTP status, or ``error_kind``: timeout, connection_reset,
        connection_refused, dns) and let the ledger classify it as confirm, fail, fail_halt or
        unknown (docs/api.md). Returns the answer ``{"classification", "operation", ...}``."""
        if self.state != DISPATCHED:
            raise StepUsageError(f"the step is {self.state}; only a dispatched step takes an outcome")
        answer = self.job.outcome(self.operation_key, http_status, error_kind, remote_id, receipt, error, cost)
        self.operation = answer["operation"]
        self.state = {"confirm": CONFIRMED, "unknown": UNKNOWN}.get(answer["classification"], FAILED)
        return answer

    def __exit__(self, exc_type, exc, tb):
        if self.state != DISPATCHED:
            return False
        if exc is None:
            problem = ConfirmForgotten(f"step '{self.action}' ({self.operation_key}) ended without confirm() or "
                                       "fail(); it is recorded UNKNOWN and the next run reconciles it")
            recorded = self._record(self.unknown, error_of(problem))
            if recorded is not None:
                raise problem from recorded
            raise problem
        if isinstance(exc, NotSent):
            recorded = self._record(self.fail, exc.retryable, exc.error or error_of(exc))
        else:
            recorded = self._record(self.unknown, error_of(exc))
        if recorded is not None:
            exc.add_note(f"durable_ledger.client: recording the outcome failed ({type(recorded).__name__}); "
                         "the operation stays SENT and the next begin reconciles it")
        return False

    def _record(self, how, *args):
        """Record the outcome; a failure to record is returned, never raised over the body's own
        exception (a SENT row is reconciled by the next begin just like an UNKNOWN one)."""
        try:
            how(*args)
            return None
        except Exception as rec:  # noqa: BLE001 - stale token, ledger down: the row stays SENT
            log.warning("could not record the outcome of %s: %s", self.operation_key, type(rec).__name__)
            return rec


def split_result(result):
    """A gated function's return value as (remote_id, receipt). Accepted: ``(remote_id, receipt)``,
    a dict with ``remote_id`` (the rest is the receipt), an object with ``.remote_id`` (and
    optionally ``.receipt``), or the remote id itself (a str or an int)."""
    if isinstance(result, tuple) and len(result) == 2:
        remote_id, receipt = result
    elif isinstance(result, dict) and "remote_id" in result:
        remote_id, receipt = result["remote_id"], {k: v for k, v in result.items() if k != "remote_id"}
    elif hasattr(result, "remote_id"):
        remote_id, receipt = result.remote_id, getattr(result, "receipt", None)
    elif isinstance(result, (str, int)) and not isinstance(result, bool):
        remote_id, receipt = result, None
    else:
        raise TypeError("a gated function returns (remote_id, receipt), a dict with 'remote_id', an object "
                        f"with .remote_id, or the remote id; got {type(result).__name__}")
    if remote_id in (None, ""):
        raise TypeError("a gated function's result has no remote id")
    if receipt is not None and not isinstance(receipt, dict):
        raise TypeError(f"a gated function's receipt must be a dict, not {type(receipt).__name__}")
    return remote_id, receipt or {}


def _arguments(signature, args, kwargs):
    bound = signature.bind(*args, **kwargs)
    bound.apply_defaults()
    return dict(bound.arguments)


def gated(job, action, key=None, payload=None, target=None, requires_approval=False):
    """Decorator: the function is the side effect of ``action``. ``key``, ``payload`` and
    ``target`` may be values or callables taking the function's arguments; the payload
    defaults to the arguments by name. Returns the receipt ``{"remote_id", **receipt}``,
    the same shape whether the function ran now or an earlier run's receipt was reused."""

    def pick(value, args, kwargs):
        return value(*args, **kwargs) if callable(value) else value

    def decorate(fn):
        signature = inspect.signature(fn)

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            body = pick(payload, args, kwargs) if payload is not None else _arguments(signature, args, kwargs)
            step = job.step(action, body, operation_key=pick(key, args, kwargs),
                            target=pick(target, args, kwargs), requires_approval=requires_approval)
            with step:
                if step.done:
                    return step.receipt
                remote_id, receipt = split_result(fn(*args, **kwargs))
                step.confirm(remote_id, receipt)
            return {"remote_id": str(remote_id), **receipt}

        return wrapper

    return decorate
