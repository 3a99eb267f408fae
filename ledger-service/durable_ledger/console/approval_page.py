"""The approval decision page: the preview, the binding, the step's approval policy with who has
approved so far, and the approve / deny forms. Shown by the console's approvals pages and by a
request link's pages (links.py), which post to their own routes (door "link")."""

from flask import url_for

from ..approvals import decisions, preview
from ..approvals import policy as approval_policy
from ..approvals import request_message
from ..approvals import rules as approval_rules
from ..jobs.serialize import iso
from ..web.context import config
from .base import page

EXPIRY_CHOICES_H = (1, 8, 24, 72, 168)


def asked(op):
    by, at = decisions.asked(op)
    return {"by": by, "at": iso(at)}


def render(who, op, intent=None, token=None, status=200, error=None):
    """``intent`` and ``token``: a one-tap link's confirmation page (its forms post to the link's
    routes, which verify the link again)."""
    cfg = config()
    prev = preview.publish_preview(op, cfg) if preview.is_publish_preview(op) else None
    default_h = min(EXPIRY_CHOICES_H, key=lambda h: abs(h * 3600 - cfg.approval_ttl_s))
    view = approval_rules.policy_view(op)
    refusal = approval_policy.refusal(op.approval_policy, who.name, who.groups)
    if token is not None:
        actions = {"approve": url_for("console.link_approve", token=token),
                   "deny": url_for("console.link_deny", token=token)}
    else:
        actions = {"approve": url_for("console.approve", key=op.operation_key),
                   "deny": url_for("console.deny", key=op.operation_key)}
    return page("console_approval.html", who, status, op=op, job_id=op.job.job_id, preview=prev, asked=asked(op),
                decision_status=approval_rules.status_of(op), denial=approval_rules.active_denial(op),
                shown=decisions.decision_state(op), summary=op.request_summary or {}, expiry_choices=EXPIRY_CHOICES_H,
                default_h=default_h, policy=view, policy_text=request_message.policy_text(view),
                decided=approval_rules.decided_by(op), refusal=refusal[1] if refusal else None, intent=intent,
                actions=actions, error=error)
