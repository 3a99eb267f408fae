"""Every error the ledger reports. One class per machine-readable code.

Views never build error bodies by hand: they raise one of these and the single handler in
``durable_ledger.service`` renders ``{"error": {"code", "message", "details"}}``.
"""


# Refusals that the acceptance counters report (unauthorized side effects, bad checkpoints), on
# both doors: the HTTP error handler (web/errors.py) and the in-process client (client/local.py).
COUNTED_REFUSALS = frozenset({"stale_fencing_token", "forbidden", "site_not_allowed", "phase_skipped",
                              "precondition_failed", "secret_in_checkpoint", "unknown_phase", "digest_mismatch",
                              "write_not_dispatched", "fencing_token_not_issued"})


class LedgerError(Exception):
    """Base class: a refusal the caller can act on."""

    code = "ledger_error"
    http_status = 500
    recorded = False  # set once the core has written this refusal to the audit log (not again)

    def __init__(self, message, details=None):
        super().__init__(message)
        self.message = message
        self.details = details or {}

    def to_dict(self):
        return {"error": {"code": self.code, "message": self.message, "details": self.details}}


class MalformedJson(LedgerError):
    """The request body is not a JSON object."""

    code, http_status = "malformed_json", 400


class UnsupportedMediaType(LedgerError):
    """A body was sent to a JSON route with a Content-Type other than JSON (a form, a file)."""

    code, http_status = "unsupported_media_type", 415


class PayloadTooLarge(LedgerError):
    """The request body (or an uploaded artifact) is larger than the configured limit."""

    code, http_status = "payload_too_large", 413


class MalformedRequest(LedgerError):
    """The HTTP server could not read the request's framing (a chunk size, a Content-Length, the
    start line or a header line): refused before the app, the connection closed."""

    code, http_status = "malformed_request", 400


class HeadersTooLarge(LedgerError):
    """The request's head is larger than the server reads (64 KiB)."""

    code, http_status = "headers_too_large", 431


class UnsupportedTransferCoding(LedgerError):
    """A Transfer-Encoding other than chunked. RFC 9112 6.1 suggests 501; the API answers no
    input with a 5xx (docs/api.md), so it is a 400 with a code of its own."""

    code, http_status = "unsupported_transfer_coding", 400


class ArtifactQuotaExceeded(LedgerError):
    """Storing this artifact would take the tenant past its artifact storage quota."""

    code, http_status = "artifact_quota_exceeded", 413


class Unauthorized(LedgerError):
    """No bearer token, or one the ledger does not know."""

    code, http_status = "unauthorized", 401


class Forbidden(LedgerError):
    """The token's role or tenant may not do this."""

    code, http_status = "forbidden", 403


class SiteNotAllowed(LedgerError):
    """The token may not act on this WordPress site profile."""

    code, http_status = "site_not_allowed", 403


class NotFound(LedgerError):
    """No such route or object."""

    code, http_status = "not_found", 404


class JobNotFound(NotFound):
    """No job with this id in the caller's tenant."""

    code = "job_not_found"


class OperationNotFound(NotFound):
    """No operation with this key in the caller's tenant."""

    code = "operation_not_found"


class LeaseHeld(LedgerError):
    """Another owner holds a live lease on the job."""

    code, http_status = "lease_held", 409


class HolderLive(LedgerError):
    """A takeover that respects liveness met a holder that is still working (its heartbeat is
    recent): wait and ask again, nothing was written."""

    code, http_status = "holder_live", 409


class LeaseLost(LedgerError):
    """The caller's lease was taken over or released; it must acquire a new one."""

    code, http_status = "lease_lost", 409


class TaskVersionLower(LedgerError):
    """A task version lower than the job's current one was asked for: versions only go up."""

    code, http_status = "task_version_lower", 409


class StaleFencingToken(LedgerError):
    """The fencing token is older than the job's current one: a newer holder exists."""

    code, http_status = "stale_fencing_token", 409


class InvalidTransition(LedgerError):
    """The operation is not in a state that allows this transition."""

    code, http_status = "invalid_transition", 409


class GateContended(LedgerError):
    """The operation kept changing under the gate (concurrent begins); ask again."""

    code, http_status = "gate_contended", 409


class ContentChanged(LedgerError):
    """What was approved is no longer what would be dispatched: the approver's preview (the digest,
    or the WordPress post read back) changed, so the decision is refused (reload and decide again),
    or the publishing proxy found the post's content no longer matching the approved digest."""

    code, http_status = "content_changed", 409


class StoredValueInvalid(LedgerError):
    """A value stored before the input checks covered it cannot be read (a job's budget that is
    not a number): the ledger refuses to act on it rather than guess a limit."""

    code, http_status = "stored_value_invalid", 409


class DecisionChanged(LedgerError):
    """Another decision was taken on the operation after the approver's page was shown (a denial,
    an approval, a state change): the click is refused; reload the page and decide again."""

    code, http_status = "decision_changed", 409


class ReceiptConflict(LedgerError):
    """The operation is already confirmed with another remote id."""

    code, http_status = "receipt_conflict", 409


class ValidationFailed(LedgerError):
    """The body is JSON but its fields are wrong."""

    code, http_status = "validation_error", 422



class FencingTokenNotIssued(ValidationFailed):
    """The fencing token is higher than any the ledger issued for the job (forged or mistyped)."""

    code = "fencing_token_not_issued"

class InvalidValue(LedgerError):
    """A value no column or client can hold: NUL, lone surrogate, non-finite or out-of-range number."""

    code, http_status = "invalid_value", 422


class DigestMismatch(LedgerError):
    """Same operation key, different request digest (IETF Idempotency-Key semantics)."""

    code, http_status = "digest_mismatch", 422


class OperationMismatch(LedgerError):
    """Same operation key, but the begin names another job, action or target than the stored
    operation: the stored row decides, a later request never re-interprets it."""

    code, http_status = "operation_mismatch", 422


class JobMismatch(OperationMismatch):
    code = "job_mismatch"


class ActionMismatch(OperationMismatch):
    code = "action_mismatch"


class TargetMismatch(OperationMismatch):
    code = "target_mismatch"


class SecretInCheckpoint(LedgerError):
    """A checkpoint carried something that looks like a credential."""

    code, http_status = "secret_in_checkpoint", 422


class UnknownPhase(LedgerError):
    """The phase is not part of the job's pipeline."""

    code, http_status = "unknown_phase", 422


class PhaseSkipped(LedgerError):
    """The checkpoint jumps over a phase that was never reached."""

    code, http_status = "phase_skipped", 422


class PreconditionFailed(LedgerError):
    """The checkpoint claims a phase whose evidence the ledger does not hold."""

    code, http_status = "precondition_failed", 422


# Session control (agents/): rendered by the ledger's single error handler.


class SessionNotBound(NotFound):
    """The job has no Agents API session bound to it."""

    code = "session_not_bound"


class SessionNotFound(NotFound):
    """No session with this id that the caller's tenant may bind.

    The same answer whether the id does not exist, carries no ``durable_tenant`` metadata, or
    belongs to another tenant: the answer never says that a session exists elsewhere."""

    code = "session_not_found"


class SessionConflict(LedgerError):
    """The job is bound to another session, or the session to another job."""

    code, http_status = "session_conflict", 409


class FollowUpRefused(LedgerError):
    """A follow-up may not be sent now; ``details.reasons`` says why."""

    code, http_status = "follow_up_refused", 409


class InvalidWebhook(LedgerError):
    """The webhook's signature is missing, wrong or too old; nothing was stored."""

    code, http_status = "invalid_webhook_signature", 400


class AgentsApiError(LedgerError):
    """The Agents API could not be reached or answered an error."""

    code, http_status = "agents_api_error", 502


class ArtifactNotFound(NotFound):
    """No artifact with this sha256 in the caller's tenant."""

    code = "artifact_not_found"


# The publishing proxy (wordpress/proxy/), which also raises ContentChanged when a post no longer
# matches what was approved.


class SiteNotFound(NotFound):
    """No WordPress site profile with this name is configured."""

    code = "site_not_found"


class DatabaseUnavailable(LedgerError):
    """The ledger's own database could not be used (down, unreachable, out of space, locked past
    the busy timeout). Whether a write of this call landed is unknown: call again with the same
    key once the database is back; the step's row says what happened."""

    code, http_status = "database_unavailable", 503


class WordPressUnavailable(LedgerError):
    """WordPress could not be reached or answered a lookup with an error."""

    code, http_status = "wordpress_unavailable", 502


class MediaFetchFailed(LedgerError):
    """The media URL could not be fetched (or was too large)."""

    code, http_status = "media_fetch_failed", 422


class PostNotFound(NotFound):
    """WordPress has no post with this id (or the proxy's user may not see it)."""

    code = "post_not_found"
