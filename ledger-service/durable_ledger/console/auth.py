"""Who is signed in to the console.

The browser session is Flask's signed cookie (console.py's ``ConsoleSessions``). Signed in, it
holds ``sid``: a random id whose sha256 names a row of store/console_sessions.py, with the hash of
the token that signed in. Authority is the row, never the cookie: sign-out and
`auth.revoke_token` end the row, and every copy of the cookie stops working on its next request,
in every worker.

The CSRF token every form carries is Flask-WTF's (base.py checks it on every console POST). It
lives in the same cookie session, so signing in or out (both clear the session) starts a new one.
"""

import hashlib
import secrets
import time

from flask import g, session
from flask_wtf.csrf import generate_csrf

from ..auth import authenticate, authenticate_hash, hash_token
from ..kernel.errors import Forbidden, Unauthorized
from ..store import console_sessions
from ..web.context import config

CONSOLE_ROLES = ("editor", "approver")  # admin passes every role check


def _hash(sid):
    return hashlib.sha256(sid.encode("utf-8")).hexdigest()


def current_user():
    """The signed-in principal or None; read once per request (the row, then the token)."""
    if "console_who" in g:
        return g.console_who
    g.console_who, g.console_session = None, None
    sid = session.get("sid")
    if not isinstance(sid, str) or not sid:
        return None
    row = console_sessions.live(_hash(sid), time.time())
    if row is None:  # signed out, revoked or expired: this cookie is a stranger's now
        session.pop("sid", None)
        return None
    try:
        who = authenticate_hash(row.token_hash, config().token_cache_ttl_s).require(*CONSOLE_ROLES)
    except (Unauthorized, Forbidden):
        console_sessions.end(row.session_hash, time.time(), "token_refused")
        session.pop("sid", None)
        return None
    g.console_who, g.console_session = who, row
    return who


def sign_in(raw_token):
    """Start a server-side session for the token (raises Unauthorized / Forbidden)."""
    who = authenticate(raw_token, config().token_cache_ttl_s).require(*CONSOLE_ROLES)
    now = time.time()
    if isinstance(session.get("sid"), str):
        console_sessions.end(_hash(session["sid"]), now, "replaced")
    session.clear()
    sid = secrets.token_urlsafe(32)
    console_sessions.start(_hash(sid), who.tenant, hash_token(raw_token), secrets.token_urlsafe(24), now,
                           config().console_session_ttl_s)
    session["sid"] = sid
    g.pop("console_who", None)
    return who


def sign_out():
    """End the session (its form's CSRF token was checked before the view); without one there is
    nothing to end."""
    if current_user() is not None:
        console_sessions.end(g.console_session.session_hash, time.time(), "signed_out")
    session.clear()
    g.pop("console_who", None)


def csrf_token():
    """The token for this session's forms (made now if the cookie has none)."""
    return generate_csrf()
