"""Approvals (approver role only) and the tenant's acceptance counters."""

from flask import Blueprint, jsonify

from ..jobs import report
from ..kernel import bodies
from ..web.context import config
from ..web.routing import api
from . import calls

bp = Blueprint("approvals", __name__)


@api(bp, "POST", "/v1/operations/<path:key>/approve", role="approver",
     summary='Approve a halted operation, bound to the digest shown (409 content_changed)', body=bodies.ApproveOperationSchema)
def approve_operation(who, body, key):
    """Approve what the gate halted, bound to the digest the approver saw (409 content_changed)."""
    a, created = calls.approve(who, key, body["content_digest"], config(), body["expires_in_s"], body["note"])
    return jsonify({"approval": a, "created": created}), 201 if created else 200


@api(bp, "POST", "/v1/operations/<path:key>/deny", role="approver",
     summary='Deny a halted operation with a reason (begin then answers approval_denied)', body=bodies.DenyOperationSchema)
def deny_operation(who, body, key):
    """Deny it with a reason: `begin` answers halt/approval_denied until it is approved."""
    d, created = calls.deny(who, key, body["content_digest"], body["reason"])
    return jsonify({"denial": d, "created": created}), 201 if created else 200


@api(bp, "GET", "/v1/operations/<path:key>/approvals", role="any",
     summary="An operation's approval policy, its progress ('1 of 2') and who decided (decided_by)")
def operation_approvals(who, key):
    return jsonify(calls.operation_approvals(who, key))


@api(bp, "GET", "/v1/approvals/pending", role="approver",
     summary='Operations the gate halted for an approval, with their decision')
def pending(who):
    """The operations waiting for a decision, with who asked and any standing approval or denial."""
    return jsonify({"pending": calls.pending(who)})


@api(bp, "POST", "/v1/approvals", role="approver",
     summary='Approve one version + action + content digest + target until expiry', body=bodies.ApprovalSchema)
def grant(who, body):
    return jsonify(calls.grant(who, body["job_id"], body["task_version"], body["action"], body["content_digest"], body["target"],
                               body["expires_at"], body["note"])), 201


@api(bp, "DELETE", "/v1/approvals/<int:approval_id>", role="approver", summary='Revoke an approval')
def revoke(who, approval_id):
    return jsonify(calls.revoke(who, approval_id))


@api(bp, "GET", "/v1/metrics/acceptance", role="any", summary='Tenant-wide acceptance counters')
def acceptance(who):
    return jsonify(report.acceptance_metrics(who.tenant))
