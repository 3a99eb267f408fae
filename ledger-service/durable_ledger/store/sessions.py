"""Agents session state: job <-> session bindings, saved items and turns (the webhook inbox,
follow-ups and the outbox of function results: webhooks.py, followups.py, deliveries.py); and the job, lease, checkpoint, operation and
audit reads and writes session control needs (under ``# --- for agents/...`` lines).
"""

import time

from peewee import EXCLUDED, IntegrityError, fn

from ..kernel import states as S
from .agent_models import SessionBinding, SessionItem, SessionTurn
from .db import write_txn
from .models import AuditLog, Checkpoint, Job, Operation

# Bindings


def binding_of_job(job_pk):
    """The job's binding, or None."""
    return SessionBinding.get_or_none(SessionBinding.job == job_pk)


def binding_by_session_id(session_id):
    """The binding of ``session_id``, or None."""
    return SessionBinding.get_or_none(SessionBinding.session_id == session_id)


def binding_by_pk(binding_pk):
    """The binding row as stored now (raises DoesNotExist if gone)."""
    return SessionBinding.get_by_id(binding_pk)


def binding_with_job_for_session(session_id):
    """The binding of ``session_id`` with its job joined in, or None."""
    return (SessionBinding.select(SessionBinding, Job).join(Job)
            .where(SessionBinding.session_id == session_id).get_or_none())


def bindings_mentioning_environment(ref):
    """Bindings whose stored environment text contains ``ref`` (lazy; the caller checks the id)."""
    return SessionBinding.select().where(SessionBinding.environment.contains(ref))


def mark_binding_deleted(binding_pk):
    SessionBinding.update(status="deleted", updated_at=time.time()).where(SessionBinding.id == binding_pk).execute()


def set_binding_environment(binding_pk, env):
    SessionBinding.update(environment=env, updated_at=time.time()).where(SessionBinding.id == binding_pk).execute()


def mark_binding_stale(binding_pk):
    SessionBinding.update(stale=True, updated_at=time.time()).where(SessionBinding.id == binding_pk).execute()


def clear_binding_stale(binding_pk):
    """Clears the stale flag only (``updated_at`` is left as it is)."""
    SessionBinding.update(stale=False).where(SessionBinding.id == binding_pk).execute()


# Items and turns


def upsert_items(rows):
    """Insert items by (binding, item_id); a stored terminal item is never overwritten."""
    with write_txn():
        (SessionItem.insert_many(rows)
         .on_conflict(conflict_target=[SessionItem.binding, SessionItem.item_id],
                      update={SessionItem.status: EXCLUDED.status, SessionItem.terminal: EXCLUDED.terminal,
                              SessionItem.body: EXCLUDED.body, SessionItem.updated_at: EXCLUDED.updated_at,
                              SessionItem.turn_id: EXCLUDED.turn_id, SessionItem.call_id: EXCLUDED.call_id},
                      where=(SessionItem.terminal == False))  # noqa: E712 - SQL comparison
         .execute())


def upsert_turns(rows, terminal_statuses):
    """Insert turns by (binding, turn_id); a stored turn whose status is in ``terminal_statuses``
    is never overwritten."""
    with write_txn():
        (SessionTurn.insert_many(rows)
         .on_conflict(conflict_target=[SessionTurn.binding, SessionTurn.turn_id],
                      update={SessionTurn.status: EXCLUDED.status, SessionTurn.error: EXCLUDED.error,
                              SessionTurn.completed_at: EXCLUDED.completed_at,
                              SessionTurn.updated_at: EXCLUDED.updated_at},
                      where=SessionTurn.status.not_in(terminal_statuses))
         .execute())


def item_count(binding_pk):
    """How many items of the binding are stored."""
    return SessionItem.select(fn.COUNT(SessionItem.id)).where(SessionItem.binding == binding_pk).scalar()


def turns_of(binding_pk):
    """The binding's stored turns, oldest first (list)."""
    return list(SessionTurn.select().where(SessionTurn.binding == binding_pk)
                .order_by(SessionTurn.created_at, SessionTurn.id))


# --- for agents/sessions.py


def job_or_none(tenant, job_id):
    """The tenant's job ``job_id``, or None."""
    return Job.get_or_none(Job.tenant == tenant, Job.job_id == job_id)


def job_by_pk(job_pk):
    """The job row as stored now (raises DoesNotExist if gone)."""
    return Job.get_by_id(job_pk)


def job_of_session(session_id):
    """The job whose ``session_id`` copy names this session, or None."""
    return Job.get_or_none(Job.session_id == session_id)


def insert_binding(tenant, job_pk, session_id, config_hash, status, environment, actor, now):
    """Bind in one transaction: the binding row, the job's ``session_id`` copy, the audit row.

    The binding, or None when a unique constraint refused it (the job or the session is bound)."""
    try:
        with write_txn():
            binding = SessionBinding.create(
                tenant=tenant, job=job_pk, session_id=session_id, config_hash=config_hash,
                status=status, environment=environment, created_at=now, updated_at=now)
            Job.update(session_id=session_id, updated_at=now).where(Job.id == job_pk).execute()
            AuditLog.create(tenant=tenant, job=job_pk, actor=actor, action="session_bound",
                            detail={"session_id": session_id}, created_at=now)
    except IntegrityError:
        return None
    return binding


# --- for agents/sync.py


def save_session_state(binding_pk, job_pk, fields, now):
    """Update the binding with ``fields`` and touch the job, in one transaction; the binding re-read."""
    with write_txn():
        SessionBinding.update(**fields).where(SessionBinding.id == binding_pk).execute()
        Job.update(updated_at=now).where(Job.id == job_pk).execute()
    return SessionBinding.get_by_id(binding_pk)


# --- for agents/worker.py


def stale_bindings_of_active_jobs(cutoff, limit):
    """Bindings of active jobs never synced or last synced before ``cutoff``, least recent first (list)."""
    return list(SessionBinding.select().join(Job)
                .where(Job.status == "active",
                       SessionBinding.last_synced_at.is_null() | (SessionBinding.last_synced_at < cutoff))
                .order_by(SessionBinding.last_synced_at).limit(limit))


# --- for agents/followup.py


def unresolved_operations(job_pk):
    """(operation_key, state) of the job's operations that need attention (SENT/UNKNOWN/NEEDS_REVIEW)."""
    return list(Operation.select(Operation.operation_key, Operation.state)
                .where(Operation.job == job_pk, Operation.state.in_(S.NEEDS_ATTENTION)).tuples())


def latest_checkpoint(job_pk):
    """The job's checkpoint with the highest seq, or None."""
    return Checkpoint.select().where(Checkpoint.job == job_pk).order_by(Checkpoint.seq.desc()).first()


def confirmed_operations(job_pk):
    """(action, remote_id) of the job's confirmed operations, in creation order."""
    return list(Operation.select(Operation.action, Operation.remote_id)
                .where(Operation.job == job_pk, Operation.state == S.CONFIRMED).order_by(Operation.id).tuples())
