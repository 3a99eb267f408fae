"""What every console page shares: the blueprint, the security headers, the signed-in check,
CSRF and page rendering. A leaf module: console.py (sign-in, jobs, approvals) and
console_review.py (the review queue) both add their views to ``bp`` from here.
"""

import secrets
from functools import wraps

from flask import Blueprint, redirect, render_template, request, session, url_for

from ..auth import authenticate_hash
from ..errors import Forbidden, Unauthorized
from .context import config

bp = Blueprint("console", __name__, url_prefix="/console")
CONSOLE_ROLES = ("editor", "approver")  # admin passes every role check
SESSION_PREFIXES = ("/console", "/review")
CSP = ("default-src 'none'; style-src 'unsafe-inline'; img-src 'self' http: https: data:; frame-src 'self'; "
       "form-action 'self'; base-uri 'none'; frame-ancestors 'none'")


def security_headers(resp):
    resp.headers.setdefault("Content-Security-Policy", CSP)
    resp.headers["X-Content-Type-Options"] = "nosniff"
    resp.headers["X-Frame-Options"] = "DENY"
    resp.headers["Referrer-Policy"] = "no-referrer"
    resp.headers["Cache-Control"] = "no-store"
    return resp


bp.after_request(security_headers)


def current_user():
    key = session.get("token_sha256")
    if not key:
        return None
    try:
        return authenticate_hash(key, config().token_cache_ttl_s).require(*CONSOLE_ROLES)
    except (Unauthorized, Forbidden):
        session.clear()
        return None


def csrf_token():
    if "csrf" not in session:
        session["csrf"] = secrets.token_urlsafe(24)
    return session["csrf"]


def check_csrf():
    if not secrets.compare_digest(request.form.get("csrf", ""), session.get("csrf", "")):
        raise Forbidden("the form expired; reload the page and try again", {})


def nav(who):
    items = [("Jobs", "console.jobs", "console.job")]
    if who.role in ("approver", "admin"):
        items.append(("Approvals", "console.approvals", "console.approv"))
    if who.role in ("editor", "admin"):
        items.append(("Review queue", "console.review_queue", "console.review"))
    return items


def page(template, who, http_status=200, **ctx):
    return render_template(template, who=who, nav=nav(who) if who else [], csrf=csrf_token(), **ctx), http_status


def signed_in(*roles):
    """The view gets the principal; not signed in -> the sign-in form (it comes back here)."""
    def wrap(view):
        @wraps(view)
        def inner(*args, **kwargs):
            who = current_user()
            if who is None:
                if request.method != "GET":
                    return redirect(url_for("console.home"))
                return page("console_login.html", None, next=request.full_path.rstrip("?"))
            if roles and who.role != "admin" and who.role not in roles:
                return page("console_forbidden.html", who, 403, needs=roles)
            return view(who, *args, **kwargs)
        return inner
    return wrap
