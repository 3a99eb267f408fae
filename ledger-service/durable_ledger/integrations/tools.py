"""What both framework integrations share: a tool's call as the gate sees it, run once.

    gate = ToolGate(job_for, action="refund", key_args=["order_id", "amount_cents"],
                    lookup=find_refund, requires_approval=True)
    gate.run(job, {"order_id": "A-1", "amount_cents": 2500, "note": "..."}, body)

The operation key is derived from the job and the tool's business arguments (``key_args``; all of
them by default), never from a model's call id: the same refund asked again, in this run or in a
run resumed after a crash, is the same operation. The payload (what an approval's digest covers)
is the same business arguments. The body runs only when the gate answered dispatch; a stored
receipt answers a repeat; an attempt whose outcome is unknown (the process died after the remote
write, before confirm) is looked up with ``lookup`` and settled on its answer before anything is
sent again. A lookup answers `Found(remote_id, receipt)`, `ABSENT` or `UNDECIDABLE` and nothing
else: there is no default verdict. Without a lookup the step stays for a reconciler or a person
(`NeedsReconcile`), and nothing is sent.
"""

import contextvars
import threading
from dataclasses import dataclass, field
from urllib.parse import quote

from ..client import HttpLedger, Job, NeedsReconcile, StepBlocked, split_result
from ..client.steps import DISPATCHED, REUSED, Step
from ..kernel.digest import request_digest

_current_key = contextvars.ContextVar("durable_operation_key", default=None)


def current_operation_key():
    """The operation key of the gated call whose body is running (stamp it on the remote object
    as an idempotency key, so a lookup can prove the match)."""
    return _current_key.get()


@dataclass(frozen=True)
class Found:
    """The lookup found the object this attempt created."""

    remote_id: str
    receipt: dict = field(default_factory=dict)


class _Verdict:
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return self.name


ABSENT = _Verdict("ABSENT")          # proof that the attempt's write did not land and cannot land later
UNDECIDABLE = _Verdict("UNDECIDABLE")  # the remote cannot tell: a person decides (needs_review)


@dataclass(frozen=True)
class Call:
    """One tool call as the ledger sees it."""

    job_id: str
    action: str
    operation_key: str
    payload: dict


@dataclass(frozen=True)
class ApprovalRequest:
    """What an approver is asked: the operation, the digest an approval is bound to, the console
    page where it is decided."""

    job_id: str
    action: str
    operation_key: str
    digest: str
    payload: dict
    console: str | None

    def as_dict(self):
        return {"approval_required": True, "job_id": self.job_id, "action": self.action,
                "operation_key": self.operation_key, "digest": self.digest, "payload": self.payload,
                "console": self.console}


def approve_request(approver, request, expires_in_s=None, note=None):
    """Record an approval of ``request`` (an ApprovalRequest or its dict) bound to its digest,
    with an approver's ledger. Returns the approval."""
    req = request.as_dict() if isinstance(request, ApprovalRequest) else request
    approval, _ = approver.approve(req["operation_key"], req["digest"], expires_in_s=expires_in_s, note=note)
    return approval


class _Claimed(Step):
    """A step the gate already answered (a claim made while asking about approval, or the answer
    to a lookup report): entering it asks nothing more."""

    def __init__(self, job, call, answer, target, requires_approval):
        super().__init__(job, call.action, call.payload, answer.operation_key or call.operation_key, target,
                         requires_approval)
        self.answer = answer
        self.state = DISPATCHED if answer.decision == "dispatch" else REUSED

    def __enter__(self):
        return self


class ToolGate:
    """A tool's side effect behind the ledger's gate (see the module's docstring)."""

    def __init__(self, job, action, key_args=None, lookup=None, target=None, requires_approval=False,
                 console=None):
        self._job, self.action, self.key_args = job, action, list(key_args) if key_args is not None else None
        self.lookup, self.target, self.requires_approval = lookup, target, bool(requires_approval)
        self._console = console
        self._claimed, self._locks, self._mutex = {}, {}, threading.Lock()

    def job_for(self, context=None):
        """The job a call runs in: ``job`` itself, or what the factory makes of the framework's context."""
        return self._job if isinstance(self._job, Job) else self._job(context)

    def call(self, job, args):
        payload = {k: args[k] for k in self.key_args} if self.key_args is not None else dict(args)
        version = (job.info or {}).get("task_version", 1)
        key = f"{job.job_id}:v{version}:{self.action}:{request_digest(payload)[:32]}"
        return Call(job.job_id, self.action, key, payload)

    def console_link(self, job, key):
        """The console's decision page for ``key`` (``console``: the console's root URL; by
        default the HttpLedger's own)."""
        root = self._console
        if root is None and isinstance(job.ledger, HttpLedger):
            root = job.ledger.url + "/console"
        return f"{root.rstrip('/')}/approvals/{quote(key, safe='')}" if root else None

    def _lock(self, key):
        with self._mutex:
            return self._locks.setdefault(key, threading.Lock())

    def _step(self, job, call, answer=None):
        if answer is not None:
            return _Claimed(job, call, answer, self.target, self.requires_approval)
        return job.step(call.action, call.payload, call.operation_key, self.target, self.requires_approval)

    def run(self, job, args, body):
        """Run ``body()`` (the side effect; it returns what `split_result` takes) at most once for
        these business arguments. Returns ``{"remote_id", **receipt}``; raises `StepBlocked` when
        the gate did not let it run (approval_required, needs_review, ...)."""
        call = self.call(job, args)
        with self._lock(call.operation_key):  # the same call twice at once in this process: one runs
            claimed = self._claimed.pop(call.operation_key, None)
            try:
                return self._enter(self._step(job, call, claimed), body)
            except NeedsReconcile:
                if self.lookup is None:
                    raise
                answer = self._look_up(job, call)
            if answer.decision not in ("dispatch", "reuse_receipt"):
                raise answer.blocked()
            return self._enter(self._step(job, call, answer), body)

    @staticmethod
    def _enter(step, body):
        with step:
            if step.done:
                return step.receipt
            token = _current_key.set(step.operation_key)
            try:
                remote_id, receipt = split_result(body())
            finally:
                _current_key.reset(token)
            step.confirm(remote_id, receipt)
        return {"remote_id": str(remote_id), **receipt}

    def _look_up(self, job, call):
        """Ask the remote about the attempt in flight and report the verdict; the gate answers."""
        attempt = job.ledger.operation(call.operation_key)["attempt"]
        verdict = self.lookup(operation_key=call.operation_key, **call.payload)
        if isinstance(verdict, Found):
            return job.lookup_result(call.operation_key, attempt, "found", remote_id=str(verdict.remote_id),
                                     receipt=dict(verdict.receipt or {}), evidence={"lookup": _name(self.lookup)})
        if verdict is ABSENT or verdict is UNDECIDABLE:
            return job.lookup_result(call.operation_key, attempt, verdict.name.lower(),
                                     evidence={"lookup": _name(self.lookup)})
        raise TypeError(f"a lookup answers Found(remote_id, receipt), ABSENT or UNDECIDABLE; got {verdict!r}")

    def approval_needed(self, job, args):
        """Ask the ledger whether this call waits for an approval: the `ApprovalRequest` when it
        does, else None. A call the gate lets through is claimed here and run by `run` (the
        framework calls the tool right after asking)."""
        if not self.requires_approval:
            return None
        call = self.call(job, args)
        with self._lock(call.operation_key):
            if call.operation_key in self._claimed:
                return None
            step = self._step(job, call)
            try:
                step.__enter__()
            except NeedsReconcile:
                return None  # an attempt is in flight: run() settles it before anything is sent
            except StepBlocked as blocked:
                if blocked.reason != "approval_required":
                    return None  # run() raises the same refusal where the framework shows it
                return self.request(job, call)
            self._claimed[call.operation_key] = step.answer
            return None

    def request(self, job, call):
        op = job.ledger.operation(call.operation_key)
        return ApprovalRequest(call.job_id, call.action, call.operation_key, op["request_hash"], call.payload,
                               self.console_link(job, call.operation_key))


def _name(fn):
    return getattr(fn, "__qualname__", None) or type(fn).__name__
