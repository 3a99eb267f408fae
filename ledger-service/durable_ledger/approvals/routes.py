"""Approvals (approver role only) and the tenant's acceptance counters."""

from flask import Blueprint, jsonify, request
from marshmallow import fields, validate

from ..jobs import report
from ..web import schemas
from ..web.context import config, principal
from . import calls, decisions

bp = Blueprint("approvals", __name__)


class ApproveOperationSchema(schemas.Strict):
    content_digest = fields.String(required=True, validate=validate.Regexp(r"^[0-9a-f]{64}$"))
    expires_in_s = fields.Integer(load_default=None, allow_none=True,
                                  validate=validate.Range(min=60, max=decisions.MAX_TTL_S))
    note = fields.String(load_default=None, allow_none=True, validate=validate.Length(max=2000))


class DenyOperationSchema(schemas.Strict):
    content_digest = fields.String(required=True, validate=validate.Regexp(r"^[0-9a-f]{64}$"))
    reason = fields.String(required=True, validate=validate.Length(min=1, max=2000))


@bp.post("/v1/operations/<path:key>/approve")
def approve_operation(key):
    """Approve what the gate halted, bound to the digest the approver saw (409 content_changed)."""
    who = principal().require("approver")
    b = schemas.load(ApproveOperationSchema, request)
    a, created = calls.approve(who, key, b["content_digest"], config(), b["expires_in_s"], b["note"])
    return jsonify({"approval": a, "created": created}), 201 if created else 200


@bp.post("/v1/operations/<path:key>/deny")
def deny_operation(key):
    """Deny it with a reason: `begin` answers halt/approval_denied until it is approved."""
    who = principal().require("approver")
    b = schemas.load(DenyOperationSchema, request)
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
    b = schemas.load(schemas.ApprovalSchema, request)
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
