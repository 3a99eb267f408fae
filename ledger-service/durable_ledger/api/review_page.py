"""The editors' review page: server-rendered, no JavaScript, signed-cookie session.

Editors sign in with their ledger token (role editor or admin). The session cookie (signed,
HttpOnly, SameSite=Strict; Secure when DURABLE_COOKIE_SECURE=1) holds only the token's sha256,
never the token itself, so a leaked cookie cannot be replayed against the API; the hash is
re-checked on every request, so a revoked token stops working within the token-cache TTL.
Every form carries a CSRF token.
"""

import json
import secrets

from flask import Blueprint, flash, redirect, render_template, request, session, url_for
from flask.sessions import NullSession, SecureCookieSessionInterface

from ..auth import authenticate, authenticate_hash, hash_token
from ..core import reviews
from ..errors import Forbidden, LedgerError, Unauthorized
from ..models import Setting
from .context import config

bp = Blueprint("review_page", __name__, url_prefix="/review")


class ReviewOnlySessions(SecureCookieSessionInterface):
    """Only the review page has a session; the API (the gate's hot path) never parses a cookie."""

    def open_session(self, app, request):
        if not request.path.startswith(bp.url_prefix):
            return self.make_null_session(app)
        return super().open_session(app, request)

    def save_session(self, app, session, response):
        if not isinstance(session, NullSession):
            super().save_session(app, session, response)


@bp.app_template_filter("pretty_json")
def pretty_json(value, indent=None):
    """JSON for people: readable non-ASCII and markup (autoescaping makes it safe), unlike `tojson`,
    which escapes < > & ' as \\u003c... for use inside <script>."""
    return json.dumps(value, indent=indent, ensure_ascii=False, sort_keys=True, default=str)


def session_secret(cfg):
    """DURABLE_SECRET_KEY, or one random key stored once in the database for all workers."""
    if cfg.secret_key:
        return cfg.secret_key
    Setting.insert(key="session_secret", value=secrets.token_urlsafe(48)).on_conflict_ignore().execute()
    return Setting.get_by_id("session_secret").value


def _editor():
    key = session.get("token_sha256")
    if not key:
        return None
    try:
        who = authenticate_hash(key, config().token_cache_ttl_s)
        return who.require("editor")
    except (Unauthorized, Forbidden):
        session.clear()
        return None


def _csrf():
    if "csrf" not in session:
        session["csrf"] = secrets.token_urlsafe(24)
    return session["csrf"]


def _check_csrf():
    if not secrets.compare_digest(request.form.get("csrf", ""), session.get("csrf", "")):
        raise Forbidden("the form expired; reload the page and try again", {})


@bp.get("")
@bp.get("/")
def queue():
    who = _editor()
    if who is None:
        return render_template("review_login.html", csrf=_csrf())
    items = reviews.review_queue(who.tenant)
    groups = {}
    for item in items:
        groups.setdefault(item["job_id"], []).append(item)
    return render_template("review_queue.html", who=who, groups=groups, count=len(items), csrf=_csrf())


@bp.post("/login")
def login():
    _check_csrf()
    raw = request.form.get("token", "").strip()
    try:
        who = authenticate(raw, config().token_cache_ttl_s).require("editor")
    except (Unauthorized, Forbidden) as exc:
        flash(f"Sign-in refused: {exc.message}", "error")
        return redirect(url_for("review_page.queue"))
    session.clear()
    session["token_sha256"] = hash_token(raw)
    flash(f"Signed in as {who.name} ({who.tenant}).", "info")
    return redirect(url_for("review_page.queue"))


@bp.post("/logout")
def logout():
    _check_csrf()
    session.clear()
    return redirect(url_for("review_page.queue"))


@bp.get("/item/<path:key>")
def item(key):
    who = _editor()
    if who is None:
        return redirect(url_for("review_page.queue"))
    return render_template("review_item.html", who=who, item=reviews.review_item(who.tenant, key), csrf=_csrf())


@bp.post("/item/<path:key>/resolve")
def resolve(key):
    who = _editor()
    if who is None:
        return redirect(url_for("review_page.queue"))
    _check_csrf()
    decision = request.form.get("decision", "")
    remote_id = request.form.get("remote_id") or request.form.get("candidate") or None
    try:
        reviews.resolve(who, key, decision, remote_id, request.form.get("note") or None,
                        request.form.get("expected_state") or None)
    except LedgerError as exc:
        flash(f"Not resolved: {exc.message}", "error")
        return redirect(url_for("review_page.item", key=key))
    flash(f"{key}: {decision} recorded.", "info")
    return redirect(url_for("review_page.queue"))
