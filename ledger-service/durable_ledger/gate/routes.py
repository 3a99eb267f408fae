"""The gate and outcome transitions over HTTP."""

from flask import Blueprint, jsonify, request

from .. import gate
from ..jobs import operations as job_ops
from ..jobs.serialize import event_dict, operation_dict
from ..kernel import bodies
from ..web import schemas, tracing
from ..web.context import config, principal
from . import lookup, replies
from . import outcomes as ops
from .answers import answer_dict

bp = Blueprint("operations", __name__, url_prefix="/v1/operations")


def _gate_config(cfg=None):
    cfg = cfg or config()
    return gate.GateConfig(cfg.default_max_attempts, cfg.backoff_base_s, cfg.reconcile_claim_s)


def _begin(who, body, cfg=None):
    def decide():
        return answer_dict(gate.begin(who, config=_gate_config(cfg), **body))

    # One durable.gate span with the decision (ids only, never the payload) when tracing is on.
    return decide() if tracing.tracer is None else tracing.gate(body, decide)


@bp.post("/begin")
def begin():
    who = principal().require("runner")
    return jsonify(_begin(who, schemas.load(bodies.BeginSchema, request)))


@bp.post("/batch")
def batch():
    """Confirm finished steps and gate the next ones in one round trip (at most 100 of each).

    One item's refusal (stale token, digest mismatch, ...) is reported in its slot and does not
    undo the others (gate/replies.py). A client that gates many items per execution (an n8n node
    with a list of items) pays the HTTP and request-parsing cost once instead of once per item.
    """
    who = principal().require("runner")
    body = schemas.load(bodies.BatchSchema, request)
    return jsonify(replies.batch(who, body["confirm"], body["begin"], _gate_config()))


def _op(op):
    return jsonify(replies.outcome_dict(op))


@bp.post("/<path:key>/confirm")
def confirm(key):
    who = principal().require("runner")
    b = schemas.load(bodies.ConfirmSchema, request)
    replies.check_cost(who, key, b["cost"])
    return _op(ops.confirm(who, key, b["fencing_token"], b["remote_id"], b["receipt"], b["cost"]))


@bp.post("/<path:key>/fail")
def fail(key):
    who = principal().require("runner")
    b = schemas.load(bodies.FailSchema, request)
    return _op(ops.fail(who, key, b["fencing_token"], b["retryable"], b["error"]))


@bp.post("/<path:key>/unknown")
def unknown(key):
    who = principal().require("runner")
    b = schemas.load(bodies.UnknownSchema, request)
    return _op(ops.mark_unknown(who, key, b["fencing_token"], b["error"]))


@bp.post("/<path:key>/outcome")
def outcome(key):
    who = principal().require("runner")
    b = schemas.load(bodies.OutcomeSchema, request)
    return jsonify(replies.outcome(who, key, b))


@bp.post("/<path:key>/lookup-result")
def lookup_result(key):
    """The caller looked the object up itself (Begin Step's Look Up output): settle, then gate again."""
    who = principal().require("runner")
    b = schemas.load(bodies.LookupResultSchema, request)
    def decide():
        return answer_dict(lookup.report_lookup(who, key, config=_gate_config(), **b))

    return jsonify(decide() if tracing.tracer is None else tracing.gate({**b, "operation_key": key}, decide))


@bp.get("/<path:key>")
def get_operation(key):
    who = principal()
    op = job_ops.get_operation(who.tenant, key)
    return jsonify({"operation": operation_dict(op), "events": [event_dict(e) for e in job_ops.operation_events(op)]})
