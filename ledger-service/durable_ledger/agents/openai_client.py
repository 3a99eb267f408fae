"""The SDK client, configured by the SDK's own settings.

``OPENAI_API_KEY``, ``OPENAI_BASE_URL`` and ``OPENAI_WEBHOOK_SECRET`` are read by ``OpenAI()``
itself; ``DURABLE_OPENAI_MAX_RETRIES`` and ``DURABLE_OPENAI_TIMEOUT_S`` tune the SDK's retries.
The SDK's automatic retries are safe here: every write we send carries an Idempotency-Key.
"""

import os
import threading

from openai import OpenAI

_lock = threading.Lock()
_clients = {}


def _settings(env):
    return (
        env.get("OPENAI_API_KEY") or "unset",
        env.get("OPENAI_BASE_URL") or None,
        env.get("OPENAI_WEBHOOK_SECRET") or None,
        int(env.get("DURABLE_OPENAI_MAX_RETRIES", "2")),
        float(env.get("DURABLE_OPENAI_TIMEOUT_S", "60")),
    )


def get_client(env=None):
    """One client per distinct settings tuple (the SDK client is thread-safe and pools connections)."""
    key = _settings(os.environ if env is None else env)
    with _lock:
        client = _clients.get(key)
        if client is None:
            api_key, base_url, secret, retries, timeout = key
            client = OpenAI(api_key=api_key, base_url=base_url, webhook_secret=secret, max_retries=retries,
                            timeout=timeout)
            _clients[key] = client
        return client


def sessions(client):
    return client.beta.agents.sessions
