"""The console: one sign-in for editors, approvers and admins; server-rendered, no JavaScript.

Pages: jobs list and one job's timeline (every console role), approvals (approver), review queue
(editor; see console_review.py). The old /review URLs redirect here (review_page.py). The blueprint,
the signed-in check, CSRF and page rendering that all of them use are in console_base.py.

Sign-in is the ledger token. The session is held server-side (console_auth.py): the cookie
(signed, HttpOnly, SameSite=Strict; Secure when DURABLE_COOKIE_SECURE=1) holds a random session
id, never the token, so a leaked cookie cannot be replayed against the API, and sign-out or the
token's revocation ends it for every copy. Every form carries a CSRF token, the sign-in form too.
Every page is tenant-scoped through the signed-in principal: another tenant's job or operation is
a 404. Decision forms carry the decision state they showed and are refused if it moved.
"""

import json
import secrets

from flask import flash, redirect, request, url_for
from flask.sessions import NullSession, SecureCookieSessionInterface

from .. import store
from ..approvals import decisions, preview
from ..approvals import policy as approval_policy
from ..approvals import rules as approval_rules
from ..jobs import timeline as tl
from ..jobs.operations import get_operation
from ..jobs.serialize import iso
from ..kernel.errors import Forbidden, LedgerError, NotFound, Unauthorized
from ..kernel.links import http_url
from ..web.context import config
from . import approval_page
from . import auth as console_auth  # noqa: F401 - its views are the review queue pages on bp
from .base import SESSION_PREFIXES, bp, current_user, page, safe_next, signed_in

HOME = {"approver": "console.approvals", "editor": "console.review_queue", "admin": "console.jobs"}
JOB_FILTERS = ("q", "status", "phase", "unknown", "approval")  # the only query args the pager passes on


class ConsoleSessions(SecureCookieSessionInterface):
    """Only the console has a session; the API (the gate's hot path) never parses a cookie."""

    def open_session(self, app, request):
        if not request.path.startswith(SESSION_PREFIXES):
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


@bp.app_template_filter("short_time")
def short_time(value):
    """'2026-05-02T10:11:12.345Z' -> '2026-05-02 10:11:12 UTC' (the title attribute keeps the full value)."""
    if not value:
        return "—"
    return value.replace("T", " ")[:19] + " UTC"


@bp.app_template_filter("iso_time")
def iso_time(ts):
    return iso(ts)


@bp.app_template_filter("http_url")
def http_url_filter(value):
    """The value if it is an http(s) URL to put in an href, else None (show it as text)."""
    return http_url(value)


def session_secret(cfg):
    """DURABLE_SECRET_KEY, or one random key stored once in the database for all workers."""
    if cfg.secret_key:
        return cfg.secret_key
    return store.setting("session_secret", secrets.token_urlsafe(48))


@bp.get("")
@bp.get("/")
@signed_in()
def home(who):
    return redirect(url_for(HOME.get(who.role, "console.jobs")))


@bp.post("/login")
def login():
    nxt = safe_next(request.form.get("next"))
    try:
        who = console_auth.sign_in(request.form.get("token", "").strip())
    except (Unauthorized, Forbidden) as exc:
        flash(f"Sign-in refused: {exc.message}", "error")
        return redirect(nxt or url_for("console.home"))
    flash(f"Signed in as {who.name} ({who.role}, tenant {who.tenant}).", "info")
    return redirect(nxt or url_for(HOME.get(who.role, "console.jobs")))


@bp.post("/logout")
def logout():
    console_auth.sign_out()
    return redirect(url_for("console.home"))


# ---------------------------------------------------------------------------------------- jobs


@bp.get("/jobs")
@signed_in()
def jobs(who):
    a = request.args
    filters = {"status": a.get("status") or None, "phase": a.get("phase") or None,
               "has_unknown": a.get("unknown") == "1", "awaiting_approval": a.get("approval") == "1",
               "search": (a.get("q") or "").strip()[:255] or None}
    try:
        page_no = max(1, min(int(a.get("page", 1)), 100000))
    except ValueError:
        page_no = 1
    rows, total = tl.list_jobs(who.tenant, page=page_no, **filters)
    pages = max(1, -(-total // tl.PAGE_SIZE))
    args = {k: a[k] for k in JOB_FILTERS if a.get(k)}  # url_for reads _external, _method... as its own
    return page("console_jobs.html", who, rows=rows, total=total, page_no=page_no, pages=pages, args=args,
                phases=tl.tenant_phases(who.tenant), statuses=("active", "halted", "cancelled", "completed"))


@bp.get("/jobs/<job_id>")
@signed_in()
def job(who, job_id):
    return page("console_job.html", who, **tl.job_timeline(who.tenant, job_id, config().n8n_url))


# ----------------------------------------------------------------------------------- approvals


def _asked(op):
    by, at = decisions.asked(op)
    return {"by": by, "at": iso(at)}


@bp.get("/approvals")
@signed_in("approver")
def approvals(who):
    items = [{**w, "asked": _asked(w["op"]), "summary": w["op"].request_summary or {},
              "policy": approval_rules.policy_view(w["op"])} for w in decisions.waiting(who.tenant)]
    recent = decisions.recent(who.tenant)
    return page("console_approvals.html", who, items=items, recent=recent)


def _operation_or_404(who, key):
    return get_operation(who.tenant, key)  # another tenant's key: OperationNotFound -> not_found below


@bp.errorhandler(NotFound)
def not_found(exc):
    return page("console_not_found.html", current_user(), 404, what=exc.message)


@bp.get("/approvals/<path:key>")
@signed_in("approver")
def approval(who, key):
    return approval_page.render(who, _operation_or_404(who, key))


def _refused(who, key, exc, what):
    """A refusal of a decision: the approval page again, with the reason. The policy's refusal
    is a 403 with its code on the page (a forbidden decision is not a form to retry)."""
    if isinstance(exc, approval_policy.ApproverNotAllowed):
        return approval_page.render(who, _operation_or_404(who, key), status=403,
                                    error=f"Not {what} ({exc.code}): {exc.message}")
    flash(f"Not {what}: {getattr(exc, 'message', 'the expiry must be a number of hours')}", "error")
    return redirect(url_for("console.approval", key=key))


def decide_approve(who, key, door):
    """The approve form's post, from the console's page or a link's confirmation page."""
    op = _operation_or_404(who, key)
    try:
        hours = float(request.form.get("expires_in_h") or config().approval_ttl_s / 3600)
        approval_row, created = decisions.approve(
            who, key, request.form.get("digest", ""), ttl_s=hours * 3600, note=request.form.get("note") or None,
            check_content=preview.check_unchanged(config()), shown_state=request.form.get("shown", ""), door=door)
    except (LedgerError, ValueError) as exc:
        return _refused(who, key, exc, "approved")
    view = approval_rules.policy_view(op)
    progress = "" if view["approvals_needed"] == 1 else f" ({view['approvals']} of {view['approvals_needed']})"
    flash(f"{op.action} for job {op.job.job_id}: " + ("approved until " + iso(approval_row.expires_at) + progress
          if created else "was already approved by you or had its approvals; nothing changed") + ".", "info")
    return redirect(url_for("console.approvals"))


def decide_deny(who, key, door):
    op = _operation_or_404(who, key)
    try:
        _denial, created = decisions.deny(who, key, request.form.get("digest", ""), request.form.get("reason"),
                                          shown_state=request.form.get("shown", ""), door=door)
    except LedgerError as exc:
        return _refused(who, key, exc, "denied")
    flash(f"{op.action} for job {op.job.job_id}: " + ("denied; the workflow stops with approval_denied"
          if created else "was already denied; nothing changed") + ".", "info")
    return redirect(url_for("console.approvals"))


@bp.post("/approvals/<path:key>/approve")
@signed_in("approver")
def approve(who, key):
    return decide_approve(who, key, "console")


@bp.post("/approvals/<path:key>/deny")
@signed_in("approver")
def deny(who, key):
    return decide_deny(who, key, "console")
