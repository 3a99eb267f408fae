"""The approval request as register_wait answers it (``request``): the signed links, a summary,
and the same message as plain text, small HTML (email) and Slack blocks, for whatever n8n node
the builder sends it with. Everything shown is the stored request summary (secrets redacted by
the gate) and the operation's binding; the links grant nothing (approvals/request_links.py)."""

import time

from markupsafe import escape

from ..jobs.serialize import iso
from . import decisions, request_links
from . import policy as approval_policy
from . import rules as approval_rules


def _title(op):
    s = op.request_summary if isinstance(op.request_summary, dict) else {}
    title = s.get("title")
    return str(title) if isinstance(title, (str, int, float)) and str(title).strip() else None


def policy_text(view):
    """'2 of: alice, bob, group legal; not the runner that asked' for a policy view."""
    who = [*view["approvers"], *(f"group {g}" for g in view["groups"])]
    text = f"{view['approvals_needed']} approval{'s' if view['approvals_needed'] != 1 else ''} from " \
           + (", ".join(who) if who else "any approver")
    if not view["requester_may_approve"]:
        text += "; not the runner that asked"
    return text


def summary(op, expires_at):
    asked_by, _at = decisions.asked(op)
    view = approval_rules.policy_view(op)
    return {"job_id": op.job.job_id, "operation_key": op.operation_key, "action": op.action, "title": _title(op),
            "target": op.target, "task_version": op.task_version, "digest_prefix": op.request_hash[:12],
            "requested_by": (op.approval_policy or {}).get("requested_by") or (asked_by or "").split(":", 1)[-1] or None,
            "expires_at": iso(expires_at), "policy": approval_policy.public(op.approval_policy),
            "approved_by": view["approved_by"]}


def build(op, cfg, base_url, expires_in_s, now=None):
    """The ``request`` object of register_wait's answer."""
    now = time.time() if now is None else now
    expires_at = now + expires_in_s
    urls = request_links.links(base_url, request_links.sign(cfg, op.tenant, op.operation_key, op.request_hash,
                                                            expires_at))
    s = summary(op, expires_at)
    view = approval_rules.policy_view(op)
    done = f" Approved so far: {', '.join(s['approved_by'])} ({view['approvals']} of {view['approvals_needed']})." \
        if s["approved_by"] else ""
    head = f"Approval needed: {s['action']} for job {s['job_id']}"
    facts = [("Title", s["title"] or "—"), ("Target", s["target"] or "—"), ("Version", f"v{s['task_version']}"),
             ("Digest", s["digest_prefix"]), ("Asked by", s["requested_by"] or "—"), ("Expires", s["expires_at"]),
             ("Policy", policy_text(view) + "." + done)]
    text = "\n".join([head, *(f"{k}: {v}" for k, v in facts),
                      f"Approve: {urls['approve_link']}", f"Deny: {urls['deny_link']}",
                      f"Open the decision page (preview, sign-in if needed): {urls['link']}"])
    rows = "".join(f"<tr><th align='left' style='padding:2px 12px 2px 0'>{escape(k)}</th><td>{escape(v)}</td></tr>"
                   for k, v in facts)
    html = (f"<div style='font-family:system-ui,sans-serif;font-size:15px'><h2 style='font-size:18px'>{escape(head)}</h2>"
            f"<table>{rows}</table><p><a href='{escape(urls['link'])}'>Open the decision page</a> · "
            f"<a href='{escape(urls['approve_link'])}'>Approve…</a> · <a href='{escape(urls['deny_link'])}'>Deny…</a></p>"
            "<p style='color:#666;font-size:13px'>Each link opens the console with the preview of what will be "
            "published; nothing is decided until you confirm there.</p></div>")
    blocks = [
        {"type": "header", "text": {"type": "plain_text", "text": head[:150]}},
        {"type": "section", "fields": [{"type": "mrkdwn", "text": f"*{k}*\n{_mrkdwn(v)}"[:2000]}
                                       for k, v in facts[:6]]},
        {"type": "context", "elements": [{"type": "mrkdwn", "text": _mrkdwn(f"Policy: {facts[6][1]}")[:2000]}]},
        {"type": "actions", "elements": [
            {"type": "button", "text": {"type": "plain_text", "text": "Open preview"}, "url": urls["link"],
             "action_id": "durable_open"},
            {"type": "button", "text": {"type": "plain_text", "text": "Approve…"}, "url": urls["approve_link"],
             "style": "primary", "action_id": "durable_approve"},
            {"type": "button", "text": {"type": "plain_text", "text": "Deny…"}, "url": urls["deny_link"],
             "style": "danger", "action_id": "durable_deny"}]},
    ]
    return {**urls, "expires_at": iso(expires_at), "summary": s, "text": text, "html": html, "slack_blocks": blocks}


def _mrkdwn(value):
    """Slack's mrkdwn escapes: &, < and > (the only three it reads as markup)."""
    return str(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
