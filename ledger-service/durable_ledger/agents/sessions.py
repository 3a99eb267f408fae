"""Job <-> session mapping, persisted so a restarted app finds its sessions (never creates new ones).

``SessionBinding`` is the one source of truth for job <-> session; ``Job.session_id`` is a copy
written only here, in the same transaction as the binding row (``PUT /v1/jobs/{id}`` with a
``session_id`` binds through this module too).

Ownership. Every tenant's sessions may live in one OpenAI account, so "the API found the id"
says nothing about whose session it is. A session is bindable by tenant T only if its metadata
carries ``durable_tenant = T`` (written by whoever creates the session for T). A session that
does not exist, has no such metadata, or carries another tenant's name gets one and the same
answer: 404 ``session_not_found`` (no oracle for sessions of other tenants).
"""

import time
from contextlib import contextmanager

import openai

from ..jobs.jobs import create_or_get_job, get_job, get_job_and_lease
from ..kernel.digest import request_digest
from ..kernel.errors import AgentsApiError, SessionConflict, SessionNotBound, SessionNotFound, ValidationFailed
from ..kernel.fencing import check_fence
from ..store import sessions as session_store
from ..store.db import write_txn
from .openai_client import sessions


@contextmanager
def agents_api(what):
    """Turn SDK failures into a 502 with the remote status, never a 500."""
    try:
        yield
    except openai.APIStatusError as exc:
        raise AgentsApiError(f"Agents API refused {what}: HTTP {exc.status_code}",
                             {"status": exc.status_code, "operation": what}) from exc
    except openai.APIError as exc:
        raise AgentsApiError(f"Agents API unreachable during {what}: {type(exc).__name__}",
                             {"operation": what}) from exc


def config_hash(session):
    """Digest of the agent configuration the session runs with (model, instructions, tools...)."""
    return request_digest(session.agent.to_dict(mode="json"))


def environment_of(session):
    env = session.environment
    return {"type": env.type, "id": getattr(env, "id", None)}


TENANT_METADATA_KEY = "durable_tenant"


def _unknown_session(session_id):
    return SessionNotFound(f"no session '{session_id}' for this tenant", {"session_id": session_id})


def verify_session(client, tenant, session_id):
    """Retrieve the session and check it belongs to ``tenant``; returns it.

    Refuses with the unknown-id answer when the API has no such session or when its metadata
    does not name this tenant. Always one retrieve, whatever the outcome."""
    try:
        with agents_api("sessions.retrieve"):
            session = sessions(client).retrieve(session_id)
    except AgentsApiError as exc:
        if exc.details.get("status") == 404:
            raise _unknown_session(session_id) from None
        raise
    if (getattr(session, "metadata", None) or {}).get(TENANT_METADATA_KEY) != tenant:
        raise _unknown_session(session_id)
    return session


def bind_session(client, tenant, job_id, session_id, actor, session=None):
    """Bind ``session_id`` to the job. Returns (binding, created). Idempotent for the same pair.

    ``session``: the session already verified by ``verify_session`` for this tenant (so a
    caller can verify before it writes anything)."""
    job = get_job(tenant, job_id)
    existing = session_store.binding_of_job(job.id)
    if existing is not None:
        if existing.session_id != session_id:
            raise SessionConflict(f"job '{job_id}' is bound to session {existing.session_id}",
                                  {"bound_session_id": existing.session_id})
        return existing, False
    if job.session_id and job.session_id != session_id:
        raise SessionConflict(f"job '{job_id}' was created for session {job.session_id}",
                              {"bound_session_id": job.session_id})
    if session is None or session.id != session_id:
        session = verify_session(client, tenant, session_id)
    binding = session_store.insert_binding(tenant, job.id, session_id, config_hash(session), session.status,
                                           environment_of(session), actor, time.time())
    if binding is None:
        # Either a concurrent bind of the same pair won (fine), or the session is another job's.
        winner = session_store.binding_by_session_id(session_id)
        if winner is not None and winner.job_id == job.id:
            return winner, False
        holder = session_store.job_of_session(session_id)
        if (winner is not None and winner.tenant != tenant) or (holder is not None and holder.tenant != tenant):
            # Rows older than the metadata check: still no word about another tenant's session.
            raise _unknown_session(session_id)
        raise SessionConflict("session is already bound to another job", {"session_id": session_id})
    return binding, True


def create_job_with_session(client, tenant, job_id, session_id, actor, **spec):
    """``PUT /v1/jobs/{id}`` with a ``session_id``: create (or get) the job and bind the session,
    with the checks of ``PUT /v1/jobs/{id}/session``, in one transaction. A refused bind
    (unknown session, another tenant's, the job bound elsewhere) creates no job.
    Returns (job, created)."""
    job = session_store.job_or_none(tenant, job_id)
    if job is not None:
        bound = session_store.binding_of_job(job.id)
        if bound is not None and bound.session_id == session_id:
            return job, False  # a retried PUT: nothing to verify again
    session = verify_session(client, tenant, session_id)  # the remote call, before anything is written
    with write_txn():
        job, created = create_or_get_job(tenant, job_id, actor=actor, **spec)
        bind_session(client, tenant, job_id, session_id, actor, session=session)
    return session_store.job_by_pk(job.id), created


def _bound(job, job_id):
    binding = session_store.binding_of_job(job.id)
    if binding is None:
        raise SessionNotBound(f"job '{job_id}' has no session; PUT /v1/jobs/{job_id}/session first",
                              {"job_id": job_id})
    return binding


def get_binding(tenant, job_id):
    job = get_job(tenant, job_id)
    return job, _bound(job, job_id)


def binding_for_sync(tenant, job_id, answer_actions=False, fencing_token=None):
    """The binding a sync reads, and whether that sync answers the session's required actions.

    Answering is side effects under the job's lease: it needs the job's current fencing token,
    checked here, before anything remote is called. Only an active job answers; a halted,
    cancelled or completed job is synced and answers nothing. Returns (binding, answers)."""
    job, lease = get_job_and_lease(tenant, job_id)
    binding = _bound(job, job_id)
    if not answer_actions:
        return binding, False
    if fencing_token is None:
        raise ValidationFailed("answer_actions needs the job's fencing_token", {"field": "fencing_token"})
    check_fence(lease, fencing_token)
    return binding, job.status == "active"


def delete_session(client, binding):
    """Delete the remote session, mark the binding deleted and say what happened to the compute
    (self-hosted compute is not stopped by deleting a session)."""
    with agents_api("sessions.delete"):
        client.beta.agents.sessions.delete(binding.session_id)
    env = binding.environment or {}
    compute = {"type": env.get("type"), "id": env.get("id")}
    if env.get("type") == "self_hosted":
        compute.update(released=False, note="deleting a session does not stop self-hosted compute; stop it yourself")
    else:
        compute.update(released=env.get("type") == "openai_hosted", note="hosted compute ends with the session")
    session_store.mark_binding_deleted(binding.id)
    return compute


def binding_for_session(session_id):
    return session_store.binding_with_job_for_session(session_id)


def binding_dict(binding, job_id):
    return {
        "job_id": job_id,
        "session_id": binding.session_id,
        "config_hash": binding.config_hash,
        "config_changed": binding.config_changed,
        "session_status": binding.status,
        "environment": binding.environment,
        "item_count": binding.item_count,
        "required_actions": binding.required_actions or [],
        "stale": binding.stale,
        "last_synced_at": binding.last_synced_at,
    }
