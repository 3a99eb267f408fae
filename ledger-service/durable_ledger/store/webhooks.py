"""The Agents API webhook inbox: each webhook stored once by its id (a redelivery is a no-op),
then claimed by one worker with a conditional UPDATE; a claim older than the timeout is taken over."""

import time

from peewee import IntegrityError

from .agent_models import WebhookInbox
from .db import write_txn


def store_webhook(webhook_id, tenant, job_pk, session_id, event_type, payload, now):
    """True if the webhook was stored, False if its id was stored before (a redelivery)."""
    try:
        with write_txn():
            WebhookInbox.create(webhook_id=webhook_id, tenant=tenant, job=job_pk, session_id=session_id,
                                event_type=event_type, payload=payload, received_at=now)
    except IntegrityError:
        return False
    return True


def _claimable(now, claim_timeout_s):
    return ((WebhookInbox.state == "pending")
            | ((WebhookInbox.state == "processing") & (WebhookInbox.claimed_at < now - claim_timeout_s)))


def claimable_webhooks(now, claim_timeout_s, limit):
    """Pending rows and rows claimed more than ``claim_timeout_s`` ago, oldest first (list)."""
    return list(WebhookInbox.select().where(_claimable(now, claim_timeout_s))
                .order_by(WebhookInbox.received_at).limit(limit))


def claim_webhook(row_pk, owner, claim_timeout_s, now):
    """True if this call moved the row to 'processing' for ``owner`` (conditional UPDATE)."""
    with write_txn():
        return (WebhookInbox.update(state="processing", claimed_by=owner, claimed_at=now,
                                    attempts=WebhookInbox.attempts + 1)
                .where(WebhookInbox.id == row_pk, _claimable(now, claim_timeout_s))
                .execute()) == 1


def release_webhook(row_pk, error=None):
    """Hand the row back as pending (with ``error`` as its result when given)."""
    fields = dict(state="pending", claimed_by=None, claimed_at=None)
    if error is not None:
        fields["result"] = {"error": error}
    WebhookInbox.update(**fields).where(WebhookInbox.id == row_pk).execute()


def finish_webhook(row_pk, owner, result):
    """Mark the row done, if ``owner`` still holds its claim."""
    WebhookInbox.update(state="done", result=result, processed_at=time.time()).where(
        WebhookInbox.id == row_pk, WebhookInbox.claimed_by == owner).execute()
