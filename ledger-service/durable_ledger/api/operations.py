"""The gate and outcome transitions over HTTP."""

from flask import Blueprint, jsonify, request

from ..core import operations as ops
from ..core.render import event_dict, operation_dict
from . import schemas
from .context import config, principal

bp = Blueprint("operations", __name__, url_prefix="/v1/operations")


@bp.post("/begin")
def begin():
    who = principal().require("runner")
    body = schemas.load(schemas.BeginSchema, request)
    if "payload" not in body:
        body["payload"] = ops._MISSING
    cfg = config()
    result = ops.begin(who, default_max_attempts=cfg.default_max_attempts, backoff_base_s=cfg.backoff_base_s,
                       reconcile_claim_s=cfg.reconcile_claim_s, **body)
    return jsonify(result)


def _op(op):
    return jsonify({"operation": operation_dict(op)})


@bp.post("/<path:key>/confirm")
def confirm(key):
    who = principal().require("runner")
    b = schemas.load(schemas.ConfirmSchema, request)
    return _op(ops.confirm(who, key, b["fencing_token"], b["remote_id"], b["receipt"], b["cost"]))


@bp.post("/<path:key>/fail")
def fail(key):
    who = principal().require("runner")
    b = schemas.load(schemas.FailSchema, request)
    return _op(ops.fail(who, key, b["fencing_token"], b["retryable"], b["error"]))


@bp.post("/<path:key>/unknown")
def unknown(key):
    who = principal().require("runner")
    b = schemas.load(schemas.UnknownSchema, request)
    return _op(ops.mark_unknown(who, key, b["fencing_token"], b["error"]))


@bp.post("/<path:key>/outcome")
def outcome(key):
    who = principal().require("runner")
    b = schemas.load(schemas.OutcomeSchema, request)
    kind, op = ops.record_outcome(who, key, **b)
    return jsonify({"classification": kind, "operation": operation_dict(op)})


@bp.get("/<path:key>")
def get_operation(key):
    who = principal()
    op = ops.get_operation(who.tenant, key)
    return jsonify({"operation": operation_dict(op), "events": [event_dict(e) for e in ops.operation_events(op)]})
