"""What both transports share: jobs with their lease, the gate's answer, the public calls.

A transport implements the underscore methods (dicts in, dicts out, the ledger's errors raised);
everything a caller sees is written once, here, in calls.py and in steps.py. The request bodies
are built once, in bodies.py: HttpLedger sends them, LocalLedger runs them through
durable_ledger.kernel.checks exactly as the routes do (size, values, fields), so both refuse the
same input with the same class.
"""

import os
import socket
from dataclasses import dataclass, field

from ..kernel import checks
from ..kernel.errors import ValidationFailed
# The bodies are built in bodies.py; tests import them from here too.
from .bodies import begin_body, lease_body, outcome_body, release_body, renew_body  # noqa: F401
from .calls import JobCalls, LedgerCalls
from .errors import BLOCKED, StepBlocked
from .steps import Step, gated

JOB_FIELDS = ("task_version", "pipeline", "phases", "budgets", "policy_hash", "session_id")
_ANSWER_KEYS = ("decision", "operation", "receipt", "reason", "message")


@dataclass
class GateAnswer:
    """The gate's answer as a step reads it (the same on both transports)."""

    decision: str
    operation_key: str | None
    attempt: int | None
    reason: str | None = None
    message: str | None = None
    receipt: dict | None = None
    details: dict = field(default_factory=dict)  # retry_after, budget, denial, reconciliation

    @classmethod
    def from_json(cls, body):
        op = body.get("operation") or {}
        return cls(body["decision"], op.get("operation_key"), op.get("attempt"), body.get("reason"),
                   body.get("message"), body.get("receipt"),
                   {k: v for k, v in body.items() if k not in _ANSWER_KEYS})

    def blocked(self):
        return BLOCKED.get(self.decision, StepBlocked)(self.decision, self.reason, self.message,
                                                       self.operation_key, self.details)


class Job(JobCalls):
    """A job with this worker's lease: ``fencing_token`` goes with every step."""

    def __init__(self, ledger, job_id, owner, ttl_s, lease, created):
        self.ledger, self.job_id, self.owner, self.ttl_s = ledger, job_id, owner, ttl_s
        self.fencing_token = lease["fencing_token"]
        self.expires_at = lease["expires_at"]
        self.info = lease.get("job")  # the job as GET /v1/jobs/{id} shows it
        self.needs_reconcile = lease.get("needs_reconcile", [])  # SENT / UNKNOWN / NEEDS_REVIEW rows
        self.created = created

    def __repr__(self):
        return f"Job({self.job_id!r}, owner={self.owner!r}, fencing_token={self.fencing_token})"

    def step(self, action, payload=None, operation_key=None, target=None, requires_approval=False,
             approval_policy=None):
        """``with job.step(action, payload) as step``: begin on entry (see steps.py).
        ``approval_policy``: who may approve it, e.g. ``{"approvals_needed": 2, "groups": ["legal"]}``."""
        return Step(self, action, payload, operation_key, target, requires_approval, approval_policy)

    def gated(self, action, key=None, payload=None, target=None, requires_approval=False):
        """``@job.gated("send_email", key=lambda to, subject: f"email:{to}:{subject}")``."""
        return gated(self, action, key, payload, target, requires_approval)

    def renew(self, ttl_s=None):
        lease = self.ledger._renew(self.job_id, self.owner, self.fencing_token, ttl_s or self.ttl_s)
        self.expires_at = lease["expires_at"]
        return lease

    def release(self):
        """Give the lease up now (the token high-water mark stays: this token is stale after it)."""
        self.ledger._release(self.job_id, self.owner, self.fencing_token)

    def cancel(self, reason=None):
        return self.ledger.cancel(self.job_id, reason)

    def operations(self, states=None):
        return self.ledger.operations(self.job_id, states)


def default_owner():
    return f"{socket.gethostname()}:{os.getpid()}"


class Ledger(LedgerCalls):
    """The client API; `LocalLedger` and `HttpLedger` are its two transports."""

    def job(self, job_id, owner=None, ttl_s=300, takeover=False, **job_fields):
        """Create the job if it does not exist (``job_fields``: task_version, pipeline, phases,
        budgets, policy_hash, session_id; an existing job is returned unchanged), then take its
        lease. The same owner re-acquiring a live lease keeps its fencing token."""
        unknown = sorted(set(job_fields) - set(JOB_FIELDS))
        if unknown:
            raise ValidationFailed(f"unknown job field(s) {unknown}",
                                   {"fields": {k: ["Unknown field."] for k in unknown}, "allowed": list(JOB_FIELDS)})
        checks.identifier("job_id", job_id, slashes=False)
        owner = owner or default_owner()
        _, created = self._put_job(job_id, job_fields)
        lease = self._acquire(job_id, owner, ttl_s, takeover)
        return Job(self, job_id, owner, ttl_s, lease, created)

    def cancel(self, job_id, reason=None):
        """Cancel the job for good: every later begin halts with reason cancelled."""
        checks.identifier("job_id", job_id, slashes=False)
        return self._cancel(job_id, reason)

    def operations(self, job_id, states=None):
        """The job's operations, oldest first, as GET /v1/jobs/{id}/operations shows them."""
        checks.identifier("job_id", job_id, slashes=False)
        return self._operations(job_id, list(states) if states else None)

    def operation(self, key):
        checks.identifier("operation_key", key, 512)
        return self._operation(key)

    def close(self):
        """Hand back what the transport holds for the calling thread."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
