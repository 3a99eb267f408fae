"""The gate's answer (`gate.Answer`) as the JSON the API and the n8n node read."""

from ..jobs.serialize import operation_dict
from ..kernel import states as S
from ..kernel.secrets import redact


def message(reason, budget=None):
    if budget:
        return f"the job's {budget} budget is used up; nothing is dispatched"
    return S.MESSAGES.get(reason, reason)


def answer_dict(answer):
    op = answer.op
    out = {"decision": answer.decision, "operation": operation_dict(op, answer.job_id) if op is not None else None}
    if answer.receipt is not None:
        out["receipt"] = redact(answer.receipt)
    if answer.reason:
        out["reason"] = answer.reason
        out["message"] = message(answer.reason, answer.budget)
    if answer.budget:
        out["budget"] = answer.budget
    extras = dict(answer.extras)
    if "reconciliation" in extras and "evidence" in extras["reconciliation"]:
        extras["reconciliation"] = {**extras["reconciliation"], "evidence": redact(extras["reconciliation"]["evidence"])}
    out.update(extras)
    return out
