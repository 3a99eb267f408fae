"""Review queue (editor role) and on-demand reconciliation."""

from flask import Blueprint, jsonify, request

from ..jobs import operations as ops
from ..jobs.serialize import operation_dict
from ..kernel.secrets import redact
from ..kernel import bodies
from ..web.context import config
from ..web.routing import api
from . import reviews
from .apply import reconcile_operation

bp = Blueprint("reviews", __name__)


@api(bp, "GET", "/v1/reviews", role="editor",
     summary='The review queue: UNKNOWN and NEEDS_REVIEW operations with evidence', query=('job_id',))
def queue(who):
    return jsonify({"reviews": reviews.review_queue(who.tenant, request.args.get("job_id"))})


@api(bp, "GET", "/v1/reviews/<path:key>", role="editor", summary='One review item with its events')
def item(who, key):
    return jsonify(reviews.review_item(who.tenant, key))


@api(bp, "POST", "/v1/reviews/<path:key>/resolve", role="editor",
     summary='Confirm (with remote_id), fail or abandon', body=bodies.ResolveSchema)
def resolve(who, body, key):
    op = reviews.resolve(who, key, body["decision"], body["remote_id"], body["note"], body["expected_state"])
    return jsonify({"operation": operation_dict(op)})


@api(bp, "POST", "/v1/operations/<path:key>/reconcile", role="runner, editor",
     summary='Ask the remote now and apply its verdict')
def reconcile(who, key):
    op = ops.get_operation(who.tenant, key)
    outcome, verdict, after = reconcile_operation(op, who.actor, config().reconcile_claim_s, escalate=True)
    return jsonify({"outcome": outcome, "verdict": verdict, "operation": operation_dict(after),
                    "evidence": redact(after.evidence)})
