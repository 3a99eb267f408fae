"""Webhook inbox: verify, check the session is ours, persist by webhook id, then answer 200.

Nothing here acts on the payload: the worker re-reads the session under the job's lease.
A webhook whose signature is bad, missing or older than the SDK's tolerance is refused with
400 and nothing is stored. A redelivery (same webhook id) is a no-op 200.
"""

import time

import openai

from ..kernel.errors import InvalidWebhook
from ..store import sessions as session_store
from ..store import webhooks as webhook_store
from .openai_client import get_client
from .sessions import binding_for_session


def _binding_for_event(event):
    data = getattr(event, "data", None)
    ref = getattr(data, "id", None)
    if not ref:
        return None
    if event.type.startswith("agent.session."):
        return binding_for_session(ref)
    if event.type.startswith("agent.environment."):
        # Environment events name the environment; find the session that runs in it.
        for binding in session_store.bindings_mentioning_environment(ref):
            if (binding.environment or {}).get("id") == ref:
                return binding
    return None


def receive(raw_body, headers, client=None):
    """Returns (status, body_dict). Raises InvalidWebhook for a bad signature."""
    client = client or get_client()
    try:
        event = client.webhooks.unwrap(raw_body, headers)
    except (openai.InvalidWebhookSignatureError, ValueError) as exc:
        raise InvalidWebhook(f"webhook refused: {exc}", {}) from exc
    webhook_id = headers.get("webhook-id") or event.id
    if not str(getattr(event, "type", "")).startswith("agent."):
        return 200, {"status": "ignored", "reason": "not_an_agents_event", "webhook_id": webhook_id}
    binding = _binding_for_event(event)
    if binding is None:
        return 200, {"status": "ignored", "reason": "unknown_session", "webhook_id": webhook_id}
    if not webhook_store.store_webhook(webhook_id, binding.tenant, binding.job_id, binding.session_id, event.type,
                                       event.to_dict(mode="json"), time.time()):
        return 200, {"status": "duplicate", "webhook_id": webhook_id}
    return 200, {"status": "stored", "webhook_id": webhook_id}
