"""The outbox of function results sent to an Agents API session: one row per call_id, claimed
(pending) before the send, so a retried sync never sends a call's result twice."""

import time

from .agent_models import ActionDelivery
from .db import write_txn


def claim_delivery(binding_pk, call_id, turn_id, operation_key, now):
    """The pending outbox row of ``call_id``, committed; an existing row is left as it is."""
    with write_txn():
        ActionDelivery.insert(binding=binding_pk, call_id=call_id, turn_id=turn_id, operation_key=operation_key,
                              state="pending", created_at=now, updated_at=now).on_conflict_ignore().execute()


def _delivery(binding_pk, call_id):
    return (ActionDelivery.binding == binding_pk) & (ActionDelivery.call_id == call_id)


def delivery_failed(binding_pk, call_id, error):
    """One more attempt, the error kept; the row stays pending."""
    ActionDelivery.update(attempts=ActionDelivery.attempts + 1, last_error=error,
                          updated_at=time.time()).where(_delivery(binding_pk, call_id)).execute()


def delivery_done(binding_pk, call_id):
    ActionDelivery.update(state="delivered", attempts=ActionDelivery.attempts + 1, last_error=None,
                          updated_at=time.time()).where(_delivery(binding_pk, call_id)).execute()
