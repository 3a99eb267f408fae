"""Review queue (editor role) and on-demand reconciliation."""

from flask import Blueprint, jsonify, request

from ..jobs import operations as ops
from ..jobs.serialize import operation_dict
from ..kernel.secrets import redact
from ..kernel import bodies
from ..web import schemas
from ..web.context import config, principal
from . import reviews
from .apply import reconcile_operation

bp = Blueprint("reviews", __name__)


@bp.get("/v1/reviews")
def queue():
    who = principal().require("editor")
    return jsonify({"reviews": reviews.review_queue(who.tenant, request.args.get("job_id"))})


@bp.get("/v1/reviews/<path:key>")
def item(key):
    who = principal().require("editor")
    return jsonify(reviews.review_item(who.tenant, key))


@bp.post("/v1/reviews/<path:key>/resolve")
def resolve(key):
    who = principal().require("editor")
    b = schemas.load(bodies.ResolveSchema, request)
    op = reviews.resolve(who, key, b["decision"], b["remote_id"], b["note"], b["expected_state"])
    return jsonify({"operation": operation_dict(op)})


@bp.post("/v1/operations/<path:key>/reconcile")
def reconcile(key):
    who = principal().require("runner", "editor")
    op = ops.get_operation(who.tenant, key)
    outcome, verdict, after = reconcile_operation(op, who.actor, config().reconcile_claim_s, escalate=True)
    return jsonify({"outcome": outcome, "verdict": verdict, "operation": operation_dict(after),
                    "evidence": redact(after.evidence)})
