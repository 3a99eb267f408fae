"""The approval calls as the API takes them, once for both doors: the HTTP routes
(approvals/routes.py, approvals/wait_routes.py) and the in-process client (client/local.py).
Each takes the ledger's Config where the route read the app's, so a caller outside Flask gets
the same default expiry, the same WordPress read-back and the same resume-URL hosts."""

from ..jobs.jobs import get_job
from ..jobs.operations import get_operation
from ..jobs.serialize import approval_dict, iso, operation_dict
from ..kernel import n8n_context
from ..store import approvals as store_approvals
from . import decisions, preview, request_message
from . import rules as approval_rules
from . import waits as approval_waits


def approve(principal, key, content_digest, cfg, expires_in_s=None, note=None):
    """POST /v1/operations/{key}/approve: (approval dict, created)."""
    principal.require("approver")
    ttl = expires_in_s if expires_in_s is not None else cfg.approval_ttl_s
    a, created = decisions.approve(principal, key, content_digest, ttl_s=ttl, note=note,
                                   check_content=preview.check_unchanged(cfg), door="api")
    return approval_dict(a), created


def deny(principal, key, content_digest, reason):
    """POST /v1/operations/{key}/deny: (denial dict, created)."""
    principal.require("approver")
    d, created = decisions.deny(principal, key, content_digest, reason, door="api")
    return decisions.denial_dict(d), created


def operation_approvals(principal, key):
    """GET /v1/operations/{key}/approvals: the step's policy, its progress and who decided."""
    op = get_operation(principal.tenant, key)
    return {"operation_key": op.operation_key, "state": op.state, "status": approval_rules.status_of(op),
            "content_digest": op.request_hash, "policy": approval_rules.policy_view(op),
            "decided_by": approval_rules.decided_by(op),
            "approvals": [approval_dict(a) for a in store_approvals.approvals_for(op)],
            "denials": [decisions.denial_dict(d) for d in store_approvals.denials_for(op)]}


def pending(principal):
    """GET /v1/approvals/pending: the operations waiting for a decision, with who asked and any
    standing approval or denial."""
    principal.require("approver")
    out = []
    for w in decisions.waiting(principal.tenant):
        out.append({"operation": operation_dict(w["op"]), "request_summary": w["op"].request_summary,
                    "status": "approved" if w["approval"] else "denied" if w["denial"] else "waiting",
                    "approval": approval_dict(w["approval"]) if w["approval"] else None,
                    "denial": decisions.denial_dict(w["denial"]) if w["denial"] else None,
                    "asked_at": iso(w["op"].created_at), "policy": approval_rules.policy_view(w["op"]),
                    "decided_by": approval_rules.decided_by(w["op"])})
    return out


def grant(principal, job_id, task_version, action, content_digest, target, expires_at, note=None):
    """POST /v1/approvals: an approval by digest, before (or without) a halted step."""
    principal.require("approver")
    return approval_dict(approval_rules.grant(principal, job_id, task_version, action, content_digest, target,
                                              expires_at, note))


def revoke(principal, approval_id):
    """DELETE /v1/approvals/{id}."""
    principal.require("approver")
    return approval_dict(approval_rules.revoke(principal, approval_id))


def resume_hosts(cfg):
    return approval_waits.allowed_hosts(cfg.n8n_url, cfg.resume_hosts)


def register_wait(principal, key, cfg, resume_url, fencing_token, execution_id=None, workflow_id=None,
                  link_expires_in_s=72 * 3600, base_url=None):
    """POST /v1/operations/{key}/wait: (answer, created). The n8n execution defaults to the one
    the caller's request carried (kernel/n8n_context.py), if any. The answer's ``request`` is the
    message to send to approvers (approvals/request_message.py); its links point at
    DURABLE_PUBLIC_URL, else at ``base_url`` (the host the request came to)."""
    principal.require("runner")
    n8n = n8n_context.current() or {}
    answer, created = approval_waits.register_wait(
        principal, key, resume_url, fencing_token, execution_id=execution_id or n8n.get("execution_id"),
        workflow_id=workflow_id or n8n.get("workflow_id"), hosts=resume_hosts(cfg))
    op = get_operation(principal.tenant, key)
    answer["request"] = request_message.build(op, cfg, cfg.public_url or base_url or "", link_expires_in_s)
    return answer, created


def job_waits(tenant, job_id):
    """GET /v1/jobs/{id}/waits."""
    return {"job_id": job_id, "waits": approval_waits.job_waits(tenant, get_job(tenant, job_id).id)}
