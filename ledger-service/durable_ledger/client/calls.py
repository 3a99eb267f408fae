"""The calls beyond the step cycle, written once for both transports: new versions, raw
outcomes, lookup verdicts, batches, checkpoints, approvals and approval waits, artifacts, and
the job's Agents API session. `JobCalls` and `LedgerCalls` are mixed into `Job` and `Ledger`
(ledger.py); a transport implements the underscore methods they call, with the bodies built
here (HttpLedger sends them, LocalLedger checks them as the routes do, then calls the feature)."""

import re
from dataclasses import dataclass
from datetime import datetime

from ..kernel import checks, fields
from ..kernel.errors import ValidationFailed
from .bodies import (
    approve_body,
    begin_body,
    checkpoint_body,
    deny_body,
    grant_body,
    lookup_body,
    outcome_fields,
    sync_body,
    version_body,
    wait_body,
)
from .errors import error_from_http


@dataclass
class Batch:
    """A batch's answer, slot by slot in the order asked: ``confirm`` holds the operation answer
    (a dict, as `POST .../confirm` answers) or the refusal; ``begin`` a `GateAnswer` or the
    refusal. A refusal is the exception the single call would have raised (not raised here)."""

    confirm: list
    begin: list

    @classmethod
    def from_json(cls, body, answer_cls):
        return cls([_refusal(s) or s for s in body["confirm"]],
                   [_refusal(s) or answer_cls.from_json(s) for s in body["begin"]])


def _refusal(slot):
    err = slot.get("error") if isinstance(slot, dict) else None
    return error_from_http(err.get("http_status"), slot) if isinstance(err, dict) and "code" in err else None


class JobCalls:
    """Mixed into `Job`: the calls that go with this worker's lease (its fencing token)."""

    def new_version(self, task_version=None):
        """Start a new task version of the job (absent: the next one; the current one: no-op).
        Step keys include the version, so every step runs again under the new one."""
        info = self.ledger._version(self.job_id, version_body(self.fencing_token, task_version))
        self.info = info
        return info

    def outcome(self, operation_key, http_status=None, error_kind=None, remote_id=None, receipt=None,
                error=None, cost=None):
        """Report a raw result (an HTTP status, or a transport error kind) and let the ledger
        classify it (confirm, fail, fail_halt or unknown, docs/api.md): ``{"classification",
        "operation", ...}``."""
        checks.identifier("operation_key", operation_key, 512)
        return self.ledger._raw_outcome(operation_key, {"fencing_token": self.fencing_token,
                                        **outcome_fields(http_status, error_kind, remote_id, receipt, error, cost)})

    def lookup_result(self, operation_key, attempt, result, remote_id=None, receipt=None, evidence=None):
        """Report what your own lookup of an in-flight attempt found (``result``: found, absent or
        undecidable); the answer is the gate's new `GateAnswer` (``details["lookup"]``)."""
        checks.identifier("operation_key", operation_key, 512)
        return self.ledger._lookup(operation_key, lookup_body(self.fencing_token, attempt, result, remote_id,
                                                              receipt, evidence))

    def batch(self, confirm=(), begin=()):
        """Confirm finished steps and gate the next ones in one call (at most 100 of each).
        ``confirm``: dicts with operation_key, remote_id and optionally receipt and cost;
        ``begin``: dicts with action and optionally payload, operation_key, target,
        requires_approval, approval_policy. Returns a `Batch`; one item's refusal does not undo the others."""
        confirms = [{"operation_key": c.get("operation_key"), "fencing_token": self.fencing_token,
                     "remote_id": c.get("remote_id"), "receipt": c.get("receipt") or {}, "cost": c.get("cost")}
                    for c in confirm]
        begins = [begin_body(self.job_id, b.get("action"), self.fencing_token, b.get("payload"),
                             b.get("operation_key"), b.get("target"), b.get("requires_approval", False),
                             b.get("approval_policy"))
                  for b in begin]
        return self.ledger._batch({"confirm": confirms, "begin": begins})

    def checkpoint(self, phase, task_version=None, artifacts=None, remote=None, next_allowed_actions=None,
                   approval_status=None):
        """Record the job's progress (``phase``, the artifacts it produced, remote ids): the
        latest checkpoint is what a restarted run resumes from. Returns ``{"checkpoint", "job"}``."""
        body = checkpoint_body(self.fencing_token, phase, task_version, artifacts, remote, next_allowed_actions,
                               approval_status)
        out = self.ledger._checkpoint(self.job_id, body)
        self.info = out["job"]
        return out

    def checkpoints(self):
        return self.ledger.checkpoints(self.job_id)

    def latest_checkpoint(self):
        """The job's newest checkpoint, or None."""
        cps = self.checkpoints()
        return cps[-1] if cps else None

    def wait_for_approval(self, operation_key, resume_url, execution_id=None, workflow_id=None):
        """Register ``resume_url`` to be called once when an approver decides ``operation_key``
        (halted with approval_required). Returns the wait's answer."""
        checks.identifier("operation_key", operation_key, 512)
        return self.ledger._wait(operation_key, wait_body(self.fencing_token, resume_url, execution_id, workflow_id))

    def waits(self):
        return self.ledger.waits(self.job_id)

    def bind_session(self, session_id):
        """Bind the job to an Agents API session (PUT /v1/jobs/{id}/session)."""
        return self.ledger.bind_session(self.job_id, session_id)

    def sync_session(self, answer_actions=False, rebuild_stream=False, expected_artifacts=()):
        """Pull the bound session's items and turns (answering its required actions through the
        gate when ``answer_actions``, which needs this lease)."""
        token = self.fencing_token if answer_actions else None
        return self.ledger._sync(self.job_id, sync_body(token, answer_actions, rebuild_stream, expected_artifacts))

    def session(self):
        return self.ledger.session(self.job_id)


class LedgerCalls:
    """Mixed into `Ledger`: reads, approvals (an approver's ledger) and artifacts."""

    def get_job(self, job_id):
        """The job as GET /v1/jobs/{id} shows it."""
        checks.identifier("job_id", job_id, slashes=False)
        return self._get_job(job_id)

    def checkpoints(self, job_id):
        """The job's checkpoints, oldest first."""
        checks.identifier("job_id", job_id, slashes=False)
        return self._checkpoints(job_id)

    def waits(self, job_id):
        """Every approval wait of the job with its delivery, oldest first."""
        checks.identifier("job_id", job_id, slashes=False)
        return self._waits(job_id)

    def pending_approvals(self):
        """The operations waiting for a decision (approver)."""
        return self._pending()

    def approve(self, operation_key, content_digest, expires_in_s=None, note=None):
        """Approve what the gate halted, bound to the digest you were shown (approver).
        Returns ``(approval, created)``."""
        checks.identifier("operation_key", operation_key, 512)
        return self._decide("approve", operation_key, approve_body(content_digest, expires_in_s, note))

    def deny(self, operation_key, content_digest, reason):
        """Deny it with a reason (approver): begin halts with approval_denied. ``(denial, created)``."""
        checks.identifier("operation_key", operation_key, 512)
        return self._decide("deny", operation_key, deny_body(content_digest, reason))

    def grant_approval(self, job_id, task_version, action, content_digest, target, expires_at, note=None):
        """Approve ``action`` of the job's ``task_version`` for this content digest and target
        until ``expires_at`` (a datetime or an ISO 8601 string), before any step halted
        (approver). Returns the approval; its ``id`` revokes it."""
        if isinstance(expires_at, datetime):
            expires_at = expires_at.isoformat()
        return self._grant(grant_body(job_id, task_version, action, content_digest, target, expires_at, note))

    def revoke_approval(self, approval_id):
        """Revoke an approval (approver): a step it did not cover yet halts again."""
        if isinstance(approval_id, bool) or not isinstance(approval_id, int):
            raise ValidationFailed("approval_id must be an integer",
                                   {"fields": {"approval_id": ["Not a valid integer."]}})
        return self._revoke(approval_id)

    def put_artifact(self, data, sha256=None):
        """Store bytes content-addressed: ``{"sha256", "size", "created"}``. ``sha256``: what the
        bytes must hash to (refused otherwise)."""
        return self._put_artifact(bytes(data), sha256)

    def artifact(self, sha256):
        """The stored bytes of ``sha256``."""
        # Refused here, as agents/artifacts.py refuses it, before it becomes a URL: a value with a
        # slash would otherwise be the router's 404 over HTTP and a validation error in process.
        if not isinstance(sha256, str) or re.fullmatch(fields.SHA256_PATTERN, sha256) is None:
            raise ValidationFailed("sha256 must be 64 lowercase hex digits", {"field": "sha256"})
        return self._artifact(sha256)

    def bind_session(self, job_id, session_id):
        checks.identifier("job_id", job_id, slashes=False)
        return self._bind(job_id, {"session_id": session_id})

    def session(self, job_id):
        """The job's session binding with its turns."""
        checks.identifier("job_id", job_id, slashes=False)
        return self._session_of(job_id)
