"""Approvals (approver role only) and the tenant's acceptance counters."""

from flask import Blueprint, jsonify, request

from ..jobs import report
from ..kernel import bodies
from ..web import schemas
from ..web.context import config, principal
from . import calls

bp = Blueprint("approvals", __name__)


@bp.post("/v1/operations/<path:key>/approve")
def approve_operation(key):
    """Approve what the gate halted, bound to the digest the approver saw (409 content_changed)."""
    who = principal().require("approver")
    b = schemas.load(bodies.ApproveOperationSchema, request)
    a, created = calls.approve(who, key, b["content_digest"], config(), b["expires_in_s"], b["note"])
    return jsonify({"approval": a, "created": created}), 201 if created else 200


@bp.post("/v1/operations/<path:key>/deny")
def deny_operation(key):
    """Deny it with a reason: `begin` answers halt/approval_denied until it is approved."""
    who = principal().require("approver")
    b = schemas.load(bodies.DenyOperationSchema, request)
    d, created = calls.deny(who, key, b["content_digest"], b["reason"])
    return jsonify({"denial": d, "created": created}), 201 if created else 200


@bp.get("/v1/approvals/pending")
def pending():
    """The operations waiting for a decision, with who asked and any standing approval or denial."""
    who = principal().require("approver")
    return jsonify({"pending": calls.pending(who)})


@bp.post("/v1/approvals")
def grant():
    who = principal().require("approver")
    b = schemas.load(bodies.ApprovalSchema, request)
    return jsonify(calls.grant(who, b["job_id"], b["task_version"], b["action"], b["content_digest"], b["target"],
                               b["expires_at"], b["note"])), 201


@bp.delete("/v1/approvals/<int:approval_id>")
def revoke(approval_id):
    who = principal().require("approver")
    return jsonify(calls.revoke(who, approval_id))


@bp.get("/v1/metrics/acceptance")
def acceptance():
    who = principal()
    return jsonify(report.acceptance_metrics(who.tenant))
