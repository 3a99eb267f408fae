"""The gate and outcome transitions over HTTP."""

from flask import Blueprint, jsonify

from .. import gate
from ..jobs import operations as job_ops
from ..jobs.leases import carried_heartbeat
from ..jobs.serialize import event_dict, operation_dict
from ..kernel import bodies
from ..web import tracing
from ..web.context import config
from ..web.routing import api
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


def _heartbeat(who, beat, job_id, token, cfg):
    """The holder's heartbeat a begin or a confirm carries, renewed after the call's own work:
    the node's beat beside that call, in its round trip (jobs/leases.py)."""
    cfg = cfg or config()
    return carried_heartbeat(who.tenant, job_id, beat["owner"], token, beat["live_s"], cfg.default_lease_ttl_s)


@api(bp, "POST", "/begin", role="runner", summary="The gate: decide whether a side effect may be dispatched",
     body=bodies.BeginCallSchema, hot=True)
def begin(who, body, cfg):
    beat = body.pop("heartbeat")
    answer = _begin(who, body, cfg)
    if beat is not None:
        answer["heartbeat"] = _heartbeat(who, beat, body["job_id"], body["fencing_token"], cfg)
    return answer


@api(bp, "POST", "/batch", role="runner",
     summary='Confirm finished steps and gate new ones in one round trip', body=bodies.BatchSchema, hot=True)
def batch(who, body, cfg):
    """Confirm finished steps and gate the next ones in one round trip (at most 100 of each).

    One item's refusal (stale token, digest mismatch, ...) is reported in its slot and does not
    undo the others (gate/replies.py). A client that gates many items per execution (an n8n node
    with a list of items) pays the HTTP and request-parsing cost once instead of once per item.
    """
    return replies.batch(who, body["confirm"], body["begin"], _gate_config(cfg))


def _op(op):
    return jsonify(replies.outcome_dict(op))


@api(bp, "POST", "/<path:key>/confirm", role="runner", summary='Record a receipt', body=bodies.ConfirmSchema, hot=True)
def confirm(who, body, key, cfg=None):
    replies.check_cost(who, key, body["cost"])
    answer = replies.outcome_dict(ops.confirm(who, key, body["fencing_token"], body["remote_id"], body["receipt"],
                                              body["cost"]))
    if body["heartbeat"] is not None:
        job_id = answer["operation"]["job_id"]
        answer["heartbeat"] = _heartbeat(who, body["heartbeat"], job_id, body["fencing_token"], cfg)
    return answer


@api(bp, "POST", "/<path:key>/fail", role="runner", summary='Record a definitive failure', body=bodies.FailSchema)
def fail(who, body, key):
    return _op(ops.fail(who, key, body["fencing_token"], body["retryable"], body["error"]))


@api(bp, "POST", "/<path:key>/unknown", role="runner",
     summary='Record an unprovable outcome', body=bodies.UnknownSchema)
def unknown(who, body, key):
    return _op(ops.mark_unknown(who, key, body["fencing_token"], body["error"]))


@api(bp, "POST", "/<path:key>/outcome", role="runner",
     summary='Record a raw outcome; the ledger classifies it', body=bodies.OutcomeSchema, hot=True)
def outcome(who, body, key):
    return replies.outcome(who, key, body)


@api(bp, "POST", "/<path:key>/lookup-result", role="runner",
     summary="Report what the caller's own lookup found (found / absent / undecidable); answers like begin",
     body=bodies.LookupResultSchema)
def lookup_result(who, body, key):
    """The caller looked the object up itself (Begin Step's Look Up output): settle, then gate again."""
    def decide():
        return answer_dict(lookup.report_lookup(who, key, config=_gate_config(), **body))

    return jsonify(decide() if tracing.tracer is None else tracing.gate({**body, "operation_key": key}, decide))


@api(bp, "GET", "/<path:key>", role="any", summary='Read an operation and its events')
def get_operation(who, key):
    op = job_ops.get_operation(who.tenant, key)
    return jsonify({"operation": operation_dict(op), "events": [event_dict(e) for e in job_ops.operation_events(op)]})
