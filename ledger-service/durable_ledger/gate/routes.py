"""The gate and outcome transitions over HTTP."""

from flask import Blueprint, jsonify, request

from .. import gate
from ..jobs import operations as job_ops
from ..jobs.serialize import event_dict, operation_dict
from ..kernel.errors import InvalidValue, LedgerError
from ..kernel.limits import MAX_JOB_COST
from ..reconciliation import attempts
from ..web import schemas, tracing
from ..web.context import config, principal
from . import lookup
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
    return jsonify(_begin(who, schemas.load(schemas.BeginSchema, request)))


@bp.post("/batch")
def batch():
    """Confirm finished steps and gate the next ones in one round trip (at most 100 of each).

    Confirms run first, then begins, each item on its own: one item's refusal (stale token,
    digest mismatch, ...) is reported in its slot and does not undo the others. A client that
    gates many items per execution (an n8n node with a list of items) pays the HTTP and
    request-parsing cost once instead of once per item.
    """
    who = principal().require("runner")
    return jsonify(_batch(who, schemas.load(schemas.BatchSchema, request)))


def _batch(who, body, cfg=None):
    # Each item is decided on its own, as by the single routes: a refusal is reported in its
    # slot and changes no other item. On PostgreSQL the items nothing stands in the way of are
    # confirmed by one statement and claimed by one more (gate/batch.py); the rest, and
    # every item on SQLite, go through the single-item path.
    plain = [(i, item) for i, item in enumerate(body["confirm"]) if not item["cost"]]
    fast = ops.confirm_many(who, [(it["operation_key"], it["fencing_token"], it["remote_id"], it["receipt"])
                                  for _, it in plain])
    fast = {plain[j][0]: op for j, op in fast.items()}
    out = {"confirm": [{"operation": operation_dict(fast[i])} if i in fast else _item(lambda: _batch_confirm(who, item))
                       for i, item in enumerate(body["confirm"])],
           "begin": [_slot(answer) for answer in gate.begin_many(who, body["begin"], _gate_config(cfg))]}
    return out


def _batch_confirm(who, item):
    _check_cost(who, item["operation_key"], item["cost"])
    return _op_dict(ops.confirm(who, item["operation_key"], item["fencing_token"], item["remote_id"], item["receipt"],
                                item["cost"]))


def _slot(answer):
    return _error_slot(answer) if isinstance(answer, LedgerError) else answer_dict(answer)


def _error_slot(exc):
    slot = exc.to_dict()
    slot["error"]["http_status"] = exc.http_status
    return slot


def _item(work):
    """One slot: the single route's body, or its error with the HTTP status it would have had."""
    try:
        return work()
    except LedgerError as exc:
        return _error_slot(exc)


def _check_cost(who, key, cost):
    """Refuse a confirm whose cost would take the job's total past MAX_JOB_COST.

    Read-then-add, so two concurrent confirms can both pass the check: the window lets the
    total exceed the cap by at most one MAX_COST_PER_CALL per concurrent confirm, which keeps
    it finite (the point: an Infinity total made every read of the job invalid JSON).
    """
    if not cost:
        return
    job = job_ops.get_operation(who.tenant, key).job
    if job.cost + cost > MAX_JOB_COST:
        raise InvalidValue(f"the job's cost total would pass {MAX_JOB_COST:g}",
                           {"field": "cost", "job_cost": job.cost, "max_total": MAX_JOB_COST})


def _op_dict(op):
    """An outcome's answer: the operation, and for a receipt that did not settle the attempt
    (another n8n execution's) the decision the node routes on (reconciliation/attempts.py)."""
    return {"operation": operation_dict(op), **attempts.answer_of(op)}


def _op(op):
    return jsonify(_op_dict(op))


@bp.post("/<path:key>/confirm")
def confirm(key):
    who = principal().require("runner")
    b = schemas.load(schemas.ConfirmSchema, request)
    _check_cost(who, key, b["cost"])
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
    _check_cost(who, key, b["cost"])
    kind, op = ops.record_outcome(who, key, **b)
    return jsonify({"classification": kind, **_op_dict(op)})


@bp.post("/<path:key>/lookup-result")
def lookup_result(key):
    """The caller looked the object up itself (Begin Step's Look Up output): settle, then gate again."""
    who = principal().require("runner")
    b = schemas.load(schemas.LookupResultSchema, request)
    def decide():
        return answer_dict(lookup.report_lookup(who, key, config=_gate_config(), **b))

    return jsonify(decide() if tracing.tracer is None else tracing.gate({**b, "operation_key": key}, decide))


@bp.get("/<path:key>")
def get_operation(key):
    who = principal()
    op = job_ops.get_operation(who.tenant, key)
    return jsonify({"operation": operation_dict(op), "events": [event_dict(e) for e in job_ops.operation_events(op)]})
