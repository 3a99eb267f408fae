"""Refusals specific to session control. Rendered by the ledger's single error handler."""

from ..errors import LedgerError, NotFound


class SessionNotBound(NotFound):
    """The job has no Agents API session bound to it."""

    code = "session_not_bound"


class SessionNotFound(NotFound):
    """The Agents API has no session with this id (binding to it is the caller's mistake)."""

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
