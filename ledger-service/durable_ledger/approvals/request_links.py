"""Signed console links for an approval request (the message Wait for Approval sends).

A link names one operation of one tenant, the request digest it asked to approve, and an expiry,
signed with the ledger's secret (itsdangerous; DURABLE_SECRET_KEY or the stored session key).
It grants nothing: the console verifies it, then shows the decision page to whoever is signed
in, who still needs the approver role, the operation's tenant and the step's policy. What it
protects against is a link edited to point at another operation or digest (the signature
breaks), or used after its time (expired): both are a page that says so, and nothing else.

    link = /console/a/<signed {tenant, key, digest, expiry}>[?intent=approve|deny]

The one-tap variants open a confirmation page with the preview: a GET never decides, so a mail
scanner that prefetches every link in a message changes nothing.
"""

import secrets
import time
from urllib.parse import quote

from itsdangerous import BadSignature, URLSafeSerializer

from .. import store

SALT = "durable-steps/approval-request"
INTENTS = ("approve", "deny")


class LinkRefused(Exception):
    """A link that is forged, altered or expired; ``reason``: 'invalid' or 'expired'."""

    def __init__(self, reason, message):
        super().__init__(message)
        self.reason, self.message = reason, message


def secret(cfg):
    """DURABLE_SECRET_KEY, or the random key stored once for all workers (the console's too)."""
    return cfg.secret_key or store.setting("session_secret", secrets.token_urlsafe(48))


def _serializer(cfg):
    return URLSafeSerializer(secret(cfg), salt=SALT)


def sign(cfg, tenant, key, digest, expires_at):
    return _serializer(cfg).dumps({"t": tenant, "k": key, "d": digest, "e": int(expires_at)})


def verify(cfg, token, now=None):
    """{"tenant", "key", "digest", "expires_at"} of a genuine, unexpired link, else LinkRefused."""
    try:
        data = _serializer(cfg).loads(token)
    except BadSignature:
        raise LinkRefused("invalid", "This approval link is not valid: it was altered or was not made by this "
                                     "ledger.") from None
    if not isinstance(data, dict) or not all(k in data for k in "tkde"):
        raise LinkRefused("invalid", "This approval link is not valid.")
    now = time.time() if now is None else now
    if data["e"] <= now:
        raise LinkRefused("expired", "This approval link has expired. Open the approvals page of the console, "
                                     "or ask for the request to be sent again.")
    return {"tenant": data["t"], "key": data["k"], "digest": data["d"], "expires_at": data["e"]}


def links(base_url, token):
    """The decision page's link and its one-tap variants under ``base_url`` (the console's origin)."""
    url = f"{base_url.rstrip('/')}/console/a/{quote(token, safe='')}"
    return {"link": url, "approve_link": url + "?intent=approve", "deny_link": url + "?intent=deny"}
