"""Who is signed in to the console, and the CSRF token every form carries.

Two kinds of browser session, both in Flask's signed cookie (console.py's ``ConsoleSessions``):

- before sign-in, a random ``login_csrf`` only, carried by the sign-in form. A sign-in posted
  from another site (a login CSRF, to sign the victim in as the attacker) arrives without our
  cookie (SameSite=Strict) and so without anything to match: refused;
- signed in, ``sid``: a random id whose sha256 names a row of store/console_sessions.py. The row
  holds the hash of the token that signed in and the session's CSRF token. Authority is the row,
  never the cookie: sign-out and `auth.revoke_token` end the row, and every copy of the cookie
  stops working on its next request, in every worker.

A token is never empty: a missing or empty ``csrf`` field, or a session without a token, never
matches (an empty field once matched a session that had not rendered a form yet).
"""

import hashlib
import secrets
import time

from flask import g, request, session

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
    """End the session (its form's CSRF token checked); without one there is nothing to end."""
    if current_user() is not None:
        check_csrf()
        console_sessions.end(g.console_session.session_hash, time.time(), "signed_out")
    session.clear()
    g.pop("console_who", None)


def csrf_token():
    """The signed-in session's token, or the sign-in form's (made now if the cookie has none)."""
    current_user()
    if g.console_session is not None:
        return g.console_session.csrf
    if not isinstance(session.get("login_csrf"), str) or not session["login_csrf"]:
        session["login_csrf"] = secrets.token_urlsafe(24)
    return session["login_csrf"]


def check_csrf(login=False):
    current_user()
    if login:
        expected = session.get("login_csrf")
    else:
        expected = g.console_session.csrf if g.console_session is not None else None
    given = request.form.get("csrf")
    if not (isinstance(expected, str) and expected and given
            and secrets.compare_digest(given.encode("utf-8"), expected.encode("utf-8"))):
        raise Forbidden("the form expired; reload the page and try again", {})
