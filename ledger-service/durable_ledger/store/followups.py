"""Follow-up messages to an Agents API session: one row per (job, Idempotency-Key), claimed by
INSERT before the send, so a retried follow-up is one message."""

import time

from peewee import IntegrityError

from .agent_models import FollowUp
from .db import write_txn


def follow_up_of(job_pk, key):
    """The job's follow-up under ``key``, or None."""
    return FollowUp.get_or_none(FollowUp.job == job_pk, FollowUp.idempotency_key == key)


def follow_up_by_pk(pk):
    return FollowUp.get_by_id(pk)


def claim_follow_up(job_pk, key, request_hash, packet, now):
    """(row, True) for a new 'sending' row, or (the row already under ``key``, False)."""
    try:
        with write_txn():
            return FollowUp.create(job=job_pk, idempotency_key=key, request_hash=request_hash, state="sending",
                                   packet=packet, created_at=now, updated_at=now), True
    except IntegrityError:
        return FollowUp.get(FollowUp.job == job_pk, FollowUp.idempotency_key == key), False


def count_follow_up_attempt(pk):
    FollowUp.update(attempts=FollowUp.attempts + 1, updated_at=time.time()).where(FollowUp.id == pk).execute()


def mark_follow_up_sent(pk):
    FollowUp.update(state="sent", updated_at=time.time()).where(FollowUp.id == pk).execute()
