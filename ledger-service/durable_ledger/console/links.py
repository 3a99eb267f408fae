"""The console's side of an approval request's links (approvals/request_links.py).

``GET /console/a/<token>``: verify the signature and the expiry (a forged or altered link: 400;
an expired one: 410; a clear page either way, nothing else shown), then, signed in as an
approver of the link's tenant, the operation's decision page; signed out, the sign-in form,
which comes back here. ``?intent=approve|deny`` (the one-tap links) shows the same page as a
confirmation: a GET never decides, a mail scanner that follows every link changes nothing. The
confirmation's forms post to ``/console/a/<token>/approve|deny``, which verify the link again
(it may have expired meanwhile) and decide through the console's own checks: the form token
(CSRF), the decision state shown, the role and the step's policy (door "link").

A link forwarded to someone signed in with another tenant's token is a 404 (as any other
tenant's operation); with another role, the role page; an approver the policy does not allow
sees the page without its forms, and a post is refused 403 approver_not_allowed.
"""

from flask import redirect, request, url_for

from ..approvals import request_links
from ..jobs.operations import get_operation
from ..kernel.errors import NotFound
from ..web.context import config
from . import approval_page, views
from .base import bp, page, signed_in


def _checked(who, token):
    """The operation a genuine, unexpired link of the principal's tenant names, or a page to answer."""
    try:
        link = request_links.verify(config(), token)
    except request_links.LinkRefused as exc:
        return None, page("console_link_refused.html", who, 410 if exc.reason == "expired" else 400,
                          reason=exc.reason, message=exc.message)
    if link["tenant"] != who.tenant:
        raise NotFound("no such operation")  # as any other tenant's operation: no oracle
    op = get_operation(who.tenant, link["key"])
    if op.request_hash != link["digest"]:
        return None, page("console_link_refused.html", who, 409, reason="changed",
                          message="The step this link was sent for now asks for other content: this request is "
                                  "no longer the one to decide. Open the approvals page for the current one.")
    return op, None


def _refused_early(token):
    """Forged or expired links get their page before the sign-in form (nothing to sign in for)."""
    try:
        request_links.verify(config(), token)
    except request_links.LinkRefused as exc:
        return page("console_link_refused.html", None, 410 if exc.reason == "expired" else 400,
                    reason=exc.reason, message=exc.message)
    return None


@bp.get("/a/<token>")
def link(token):
    early = _refused_early(token)
    return early if early is not None else _link(token)


@signed_in("approver")
def _link(who, token):
    op, answer = _checked(who, token)
    if answer is not None:
        return answer
    intent = request.args.get("intent")
    if intent not in request_links.INTENTS:
        return redirect(url_for("console.approval", key=op.operation_key))
    return approval_page.render(who, op, intent=intent, token=token)


@bp.post("/a/<token>/approve")
@signed_in("approver")
def link_approve(who, token):
    op, answer = _checked(who, token)
    return answer if answer is not None else views.decide_approve(who, op.operation_key, "link")


@bp.post("/a/<token>/deny")
@signed_in("approver")
def link_deny(who, token):
    op, answer = _checked(who, token)
    return answer if answer is not None else views.decide_deny(who, op.operation_key, "link")
