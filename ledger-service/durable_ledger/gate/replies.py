"""What the outcome and batch calls answer, once for both doors: the HTTP routes (gate/routes.py)
and the in-process client (client/local.py) call these and serialise nothing themselves."""

from ..jobs import operations as job_ops
from ..jobs.serialize import operation_dict
from ..kernel.errors import InvalidValue, LedgerError
from ..kernel.limits import MAX_JOB_COST
from ..reconciliation import attempts
from . import outcomes as ops
from .answers import answer_dict
from .batch import begin_many


def check_cost(principal, key, cost):
    """Refuse a confirm whose cost would take the job's total past MAX_JOB_COST.

    Read-then-add, so two concurrent confirms can both pass the check: the window lets the
    total exceed the cap by at most one MAX_COST_PER_CALL per concurrent confirm, which keeps
    it finite (the point: an Infinity total made every read of the job invalid JSON).
    """
    if not cost:
        return
    job = job_ops.get_operation(principal.tenant, key).job
    if job.cost + cost > MAX_JOB_COST:
        raise InvalidValue(f"the job's cost total would pass {MAX_JOB_COST:g}",
                           {"field": "cost", "job_cost": job.cost, "max_total": MAX_JOB_COST})


def outcome_dict(op):
    """An outcome's answer: the operation, and for a receipt that did not settle the attempt
    (another n8n execution's) the decision the node routes on (reconciliation/attempts.py)."""
    return {"operation": operation_dict(op), **attempts.answer_of(op)}


def outcome(principal, key, body):
    """POST /v1/operations/{key}/outcome: classify the raw result, apply it, answer."""
    check_cost(principal, key, body.get("cost"))
    kind, op = ops.record_outcome(principal, key, **body)
    return {"classification": kind, **outcome_dict(op)}


def error_slot(exc):
    slot = exc.to_dict()
    slot["error"]["http_status"] = exc.http_status
    return slot


def _item(work):
    """One slot: the single route's body, or its error with the HTTP status it would have had."""
    try:
        return work()
    except LedgerError as exc:
        return error_slot(exc)


def _confirm_one(principal, item):
    check_cost(principal, item["operation_key"], item["cost"])
    return outcome_dict(ops.confirm(principal, item["operation_key"], item["fencing_token"], item["remote_id"],
                                    item["receipt"], item["cost"]))


def batch(principal, confirms, begins, config):
    """Confirm finished steps and gate the next ones in one call (POST /v1/operations/batch).

    Confirms run first, then begins. Each item is decided on its own, as by the single routes:
    a refusal is reported in its slot and changes no other item. On PostgreSQL the items nothing
    stands in the way of are confirmed by one statement and claimed by one more (gate/batch.py);
    the rest, and every item on SQLite, go through the single-item path.
    """
    plain = [(i, item) for i, item in enumerate(confirms) if not item["cost"]]
    fast = ops.confirm_many(principal, [(it["operation_key"], it["fencing_token"], it["remote_id"], it["receipt"])
                                        for _, it in plain])
    fast = {plain[j][0]: op for j, op in fast.items()}
    return {"confirm": [{"operation": operation_dict(fast[i])} if i in fast
                        else _item(lambda item=item: _confirm_one(principal, item))
                        for i, item in enumerate(confirms)],
            "begin": [error_slot(answer) if isinstance(answer, LedgerError) else answer_dict(answer)
                      for answer in begin_many(principal, begins, config)]}
