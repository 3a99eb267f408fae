"""Session binding and sync as the API takes them, once for both doors: the HTTP routes
(agents/routes.py, and `PUT /v1/jobs/{id}` with a session_id) and the in-process client
(client/local.py). ``client`` is the Agents API SDK client (openai_client.get_client())."""

from ..kernel.errors import AgentsApiError, SessionNotFound
from ..store import sessions as session_store
from . import actions as agent_actions
from . import artifacts, sessions, stream, sync


def bind(client, tenant, job_id, session_id, actor):
    """PUT /v1/jobs/{id}/session: (binding dict, created)."""
    try:
        binding, created = sessions.bind_session(client, tenant, job_id, session_id, actor)
    except AgentsApiError as exc:
        # The remote's 404 for the named session is the caller's wrong id, not a bad gateway.
        if exc.details.get("status") == 404:
            raise SessionNotFound(f"the Agents API has no session '{session_id}'",
                                  {"session_id": session_id}) from exc
        raise
    return sessions.binding_dict(binding, job_id), created


def show(tenant, job_id):
    """GET /v1/jobs/{id}/session."""
    _, binding = sessions.get_binding(tenant, job_id)
    return {**sessions.binding_dict(binding, job_id), "turns": sync.turn_summary(binding)}


def sync_session(principal, client, job_id, fencing_token=None, answer_actions=False, rebuild_stream=False,
                 expected_artifacts=()):
    """POST /v1/jobs/{id}/session/sync: pull the session's items and turns (optionally rebuild
    the stream buffer first, answer its required actions through the gate, and advance the
    artifact evidence), then answer the binding with its turns."""
    principal.require("runner")
    binding, answers = sessions.binding_for_sync(principal.tenant, job_id, answer_actions, fencing_token)
    if rebuild_stream:
        stream.rebuild(client, binding)
        binding = session_store.binding_by_pk(binding.id)
    binding, session = sync.full_sync(client, binding)
    answered = None
    if answers:
        answered = agent_actions.answer_required_actions(principal, client, binding, job_id, session, fencing_token)
        binding = session_store.binding_by_pk(binding.id)
    out = {**sessions.binding_dict(binding, job_id), "turns": sync.turn_summary(binding)}
    if answered is not None:
        out["actions"] = answered
    if expected_artifacts:
        out["artifacts"] = artifacts.advance_evidence(principal.tenant, list(expected_artifacts), out["turns"])
    return out
