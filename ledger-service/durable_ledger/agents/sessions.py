"""Job <-> session mapping, persisted so a restarted app finds its sessions (never creates new ones)."""

import time
from contextlib import contextmanager

import openai
from peewee import IntegrityError

from ..core.digest import request_digest
from ..core.jobs import get_job
from ..db import write_txn
from ..models import AuditLog, Job
from .client import sessions
from .errors import AgentsApiError, SessionConflict, SessionNotBound
from .models import SessionBinding


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


def bind_session(client, tenant, job_id, session_id, actor):
    """Bind ``session_id`` to the job. Returns (binding, created). Idempotent for the same pair."""
    job = get_job(tenant, job_id)
    existing = SessionBinding.get_or_none(SessionBinding.job == job.id)
    if existing is not None:
        if existing.session_id != session_id:
            raise SessionConflict(f"job '{job_id}' is bound to session {existing.session_id}",
                                  {"bound_session_id": existing.session_id})
        return existing, False
    if job.session_id and job.session_id != session_id:
        raise SessionConflict(f"job '{job_id}' was created for session {job.session_id}",
                              {"bound_session_id": job.session_id})
    with agents_api("sessions.retrieve"):
        session = sessions(client).retrieve(session_id)
    now = time.time()
    try:
        with write_txn():
            binding = SessionBinding.create(
                tenant=tenant, job=job.id, session_id=session_id, config_hash=config_hash(session),
                status=session.status, environment=environment_of(session), created_at=now, updated_at=now)
            Job.update(session_id=session_id, updated_at=now).where(Job.id == job.id).execute()
            AuditLog.create(tenant=tenant, job=job.id, actor=actor, action="session_bound",
                            detail={"session_id": session_id}, created_at=now)
    except IntegrityError as exc:
        # Either a concurrent bind of the same pair won (fine), or the session is another job's.
        winner = SessionBinding.get_or_none(SessionBinding.session_id == session_id)
        if winner is not None and winner.job_id == job.id:
            return winner, False
        raise SessionConflict("session is already bound to another job", {"session_id": session_id}) from exc
    return binding, True


def get_binding(tenant, job_id):
    job = get_job(tenant, job_id)
    binding = SessionBinding.get_or_none(SessionBinding.job == job.id)
    if binding is None:
        raise SessionNotBound(f"job '{job_id}' has no session; PUT /v1/jobs/{job_id}/session first",
                              {"job_id": job_id})
    return job, binding


def binding_for_session(session_id):
    return (SessionBinding.select(SessionBinding, Job).join(Job)
            .where(SessionBinding.session_id == session_id).get_or_none())


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
