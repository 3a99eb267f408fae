"""The editors' review queue as a page of the console (formerly /review, which redirects here).

An editor decides with the evidence in front of them: confirm (naming the remote object, which
the ledger re-verifies), fail (a retry becomes allowed) or abandon; see reconciliation/reviews.py.
"""

from flask import flash, redirect, request, url_for

from ..kernel.errors import LedgerError
from ..reconciliation import reviews
from .base import bp, page, signed_in


@bp.get("/review")
@signed_in("editor")
def review_queue(who):
    items = reviews.review_queue(who.tenant)
    groups = {}
    for item in items:
        groups.setdefault(item["job_id"], []).append(item)
    return page("console_review_queue.html", who, groups=groups, count=len(items))


@bp.get("/review/item/<path:key>")
@signed_in("editor")
def review_item(who, key):
    return page("console_review_item.html", who, item=reviews.review_item(who.tenant, key))


@bp.post("/review/item/<path:key>/resolve")
@signed_in("editor")
def resolve(who, key):
    decision = request.form.get("decision", "")
    remote_id = request.form.get("remote_id") or request.form.get("candidate") or None
    try:
        reviews.resolve(who, key, decision, remote_id, request.form.get("note") or None,
                        request.form.get("expected_state") or None)
    except LedgerError as exc:
        if exc.http_status == 404:
            raise
        flash(f"Not resolved: {exc.message}", "error")
        return redirect(url_for("console.review_item", key=key))
    flash(f"{key}: {decision} recorded.", "info")
    return redirect(url_for("console.review_queue"))
