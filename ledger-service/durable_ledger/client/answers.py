"""The gate's answer (gate.Answer) as the in-process client reads it: the same GateAnswer that
HttpLedger builds from the route's JSON (gate/answers.py renders that JSON)."""

from ..kernel import states as S
from ..kernel.secrets import redact
from .ledger import GateAnswer


def message(reason, budget=None):
    """gate/answers.py message(): the human sentence of a reason code."""
    if budget:
        return f"the job's {budget} budget is used up; nothing is dispatched"
    return S.MESSAGES.get(reason, reason)


def gate_answer(answer):
    """gate.Answer as the client reads it: what answer_dict renders, without the operation."""
    op, details = answer.op, dict(answer.extras)
    if "evidence" in details.get("reconciliation", {}):
        details["reconciliation"] = {**details["reconciliation"], "evidence": redact(details["reconciliation"]["evidence"])}
    if answer.budget:
        details["budget"] = answer.budget
    return GateAnswer(answer.decision, op.operation_key if op is not None else None,
                      op.attempt if op is not None else None, answer.reason,
                      message(answer.reason, answer.budget) if answer.reason else None,
                      redact(answer.receipt) if answer.receipt is not None else None, details)
