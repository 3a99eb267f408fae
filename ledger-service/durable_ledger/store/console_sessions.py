"""The console's sign-ins, held server-side: one row per signed-in browser.

The cookie carries only a random session id; the row holds its sha256 (a copy of the table
does not sign anyone in), the hash of the token that signed in, and the session's CSRF token.
A row ends on sign-out, when its token is revoked, or at ``expires_at``; an ended row never
comes back, so a cookie copied before any of these stops working on its next request, in
every worker (the row is read on every console request; there is no cache in front of it).
"""

from peewee import AutoField, CharField, DoubleField

from .db import write_txn
from .models import BaseModel

KEEP_ENDED_S = 7 * 86400  # ended and expired rows are kept this long (who was signed in, when), then pruned


class ConsoleSession(BaseModel):
    id = AutoField()
    session_hash = CharField(max_length=64, unique=True)
    tenant = CharField(max_length=128)
    token_hash = CharField(max_length=64, index=True)
    csrf = CharField(max_length=64)
    created_at = DoubleField()
    expires_at = DoubleField()
    ended_at = DoubleField(null=True)
    ended_reason = CharField(max_length=32, null=True)  # signed_out, token_revoked, token_refused, replaced

    class Meta:
        table_name = "console_session"


SESSION_MODELS = [ConsoleSession]


def start(session_hash, tenant, token_hash, csrf, now, ttl_s):
    with write_txn():
        ConsoleSession.delete().where(
            (ConsoleSession.ended_at < now - KEEP_ENDED_S) | (ConsoleSession.expires_at < now - KEEP_ENDED_S)).execute()
        return ConsoleSession.create(session_hash=session_hash, tenant=tenant, token_hash=token_hash, csrf=csrf,
                                     created_at=now, expires_at=now + ttl_s)


def live(session_hash, now):
    """The session if it has not ended or expired, else None."""
    return ConsoleSession.get_or_none(ConsoleSession.session_hash == session_hash, ConsoleSession.ended_at.is_null(),
                                      ConsoleSession.expires_at > now)


def end(session_hash, now, reason):
    return (ConsoleSession.update(ended_at=now, ended_reason=reason)
            .where(ConsoleSession.session_hash == session_hash, ConsoleSession.ended_at.is_null()).execute())


def end_for_token(token_hash, now, reason):
    """End every live session the token signed in (the token was revoked): returns how many."""
    return (ConsoleSession.update(ended_at=now, ended_reason=reason)
            .where(ConsoleSession.token_hash == token_hash, ConsoleSession.ended_at.is_null()).execute())
