"""What every console page shares: the blueprint, the security headers, the signed-in check,
the `next` a sign-in returns to, and page rendering. A leaf module: console.py (sign-in, jobs,
approvals) and console_review.py (the review queue) both add their views to ``bp`` from here;
who is signed in and the CSRF tokens are console_auth.py's.
"""

import re
from functools import wraps
from urllib.parse import quote, unquote

from flask import Blueprint, redirect, render_template, request, url_for
from flask_wtf.csrf import CSRFError, CSRFProtect

from ..kernel.errors import Forbidden
from .auth import CONSOLE_ROLES, csrf_token, current_user

__all__ = ["CONSOLE_ROLES", "SESSION_PREFIXES", "bp", "current_user", "install_csrf", "page", "safe_next",
           "security_headers", "signed_in"]

bp = Blueprint("console", __name__, url_prefix="/console", template_folder="templates")
SESSION_PREFIXES = ("/console", "/review")
CSP = ("default-src 'none'; style-src 'unsafe-inline'; img-src 'self' http: https: data:; frame-src 'self'; "
       "form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
# A console path, printable ASCII only (no CR/LF, no spaces, no controls), then checked for `\`
# and dot segments: a relative URL on this origin, never `//host` or `/\host` (browsers read
# both as another host).
_NEXT = re.compile(r"/(?:console|review)(?:[/?][!-~]*)?")


csrf = CSRFProtect()


def install_csrf(app):
    """One check for every form the console takes: any POST under SESSION_PREFIXES, whichever
    view answers it (a new view is covered without a word), before the view runs. The API under
    /v1/ is authenticated by bearer tokens, never by a cookie, and is not checked.

    No referrer check on HTTPS: the pages send ``Referrer-Policy: no-referrer``, so a browser's
    form post carries none. The token is bound to the session cookie, which is SameSite=Strict."""
    app.config.update(WTF_CSRF_CHECK_DEFAULT=False, WTF_CSRF_FIELD_NAME="csrf", WTF_CSRF_TIME_LIMIT=None,
                      WTF_CSRF_SSL_STRICT=False, WTF_CSRF_METHODS=["POST", "PUT", "PATCH", "DELETE"])
    csrf.init_app(app)
    app.before_request(_check_form_token)


def _check_form_token():
    if request.method in ("GET", "HEAD", "OPTIONS", "TRACE") or not request.path.startswith(SESSION_PREFIXES):
        return
    if request.routing_exception is not None:  # no view takes it: the 404 or 405 answers
        return
    try:
        csrf.protect()
    except CSRFError:
        raise Forbidden("the form expired; reload the page and try again", {}) from None


def security_headers(resp):
    resp.headers.setdefault("Content-Security-Policy", CSP)
    resp.headers["X-Content-Type-Options"] = "nosniff"
    resp.headers["X-Frame-Options"] = "DENY"
    resp.headers["Referrer-Policy"] = "no-referrer"
    resp.headers["Cache-Control"] = "no-store"
    return resp


@bp.after_app_request
def _console_headers(resp):
    """On every answer under /console and /review: errors and unknown routes too, which no
    blueprint's after_request sees (a route that does not exist has no blueprint)."""
    return security_headers(resp) if request.path.startswith(SESSION_PREFIXES) else resp


def safe_next(value):
    """``value`` if it is a console path to return to after sign-in, else None (go home)."""
    if not isinstance(value, str) or len(value) > 2048 or not _NEXT.fullmatch(value) or "\\" in value:
        return None
    if any(unquote(seg) in (".", "..") for seg in value.split("?", 1)[0].split("/")):
        return None
    return value


def this_page():
    """Where the sign-in form returns to: this request's path (quoted) and query."""
    query = request.query_string.decode("latin-1")
    return quote(request.path, safe="/:@!$&'()*+,;=~") + ("?" + query if query else "")


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
                return page("console_login.html", None, next=safe_next(this_page()))
            if roles and who.role != "admin" and who.role not in roles:
                return page("console_forbidden.html", who, 403, needs=roles)
            return view(who, *args, **kwargs)
        return inner
    return wrap
