"""Approvals (approver role only) and the tenant's acceptance counters."""

from flask import Blueprint, jsonify, request

from ..core import approvals, report
from . import schemas
from .context import principal

bp = Blueprint("approvals", __name__)


@bp.post("/v1/approvals")
def grant():
    who = principal().require("approver")
    b = schemas.load(schemas.ApprovalSchema, request)
    a = approvals.grant(who, b["job_id"], b["task_version"], b["action"], b["content_digest"], b["target"],
                        b["expires_at"], b["note"])
    return jsonify(approvals.approval_dict(a)), 201


@bp.delete("/v1/approvals/<int:approval_id>")
def revoke(approval_id):
    who = principal().require("approver")
    return jsonify(approvals.approval_dict(approvals.revoke(who, approval_id)))


@bp.get("/v1/metrics/acceptance")
def acceptance():
    who = principal()
    return jsonify(report.acceptance_metrics(who.tenant))
