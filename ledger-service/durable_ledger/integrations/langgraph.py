"""Gated side effects for LangGraph (extra ``durable-ledger[langgraph]``).

    @gated_tool(lambda config: ledger.job(config["configurable"]["thread_id"], owner="refunds"),
                action="refund", lookup=find_refund, requires_approval=True)
    def issue_refund(order_id: str, amount_cents: int) -> dict:
        return create_refund(order_id, amount_cents)

    def refund_node(state):                      # or wrap it with langchain's @tool for a ToolNode
        return {"receipt": issue_refund(state["order_id"], state["amount_cents"])}

LangGraph runs a node again from its start when a graph resumes (after a crash, or after an
interrupt): the gated call is the same operation each time, so its side effect happens once and
the later runs get the receipt. An approval is asked with ``interrupt()``: its value is the
ledger's request (operation key, digest, console link). Resuming the graph
(``Command(resume=...)``) runs the node again and the gate decides: dispatch once the approval
(given in the console, or with `approve_request`) is live, another interrupt when it is not
(none given, expired, or given for other arguments). Other refusals raise `StepBlocked`.
``job``: a client `Job`, or a factory taking the node's `RunnableConfig`.
"""

import functools
import inspect

from langgraph.config import get_config
from langgraph.types import interrupt

from ..client import Halted
from .tools import ABSENT, UNDECIDABLE, Found, ToolGate, approve_request, current_operation_key

__all__ = ["gated_tool", "Found", "ABSENT", "UNDECIDABLE", "approve_request", "current_operation_key"]


def _config():
    try:
        return get_config()
    except RuntimeError:  # called outside a graph
        return None


def gated_tool(job, action=None, key_args=None, lookup=None, target=None, requires_approval=False, console=None):
    """Decorator: the function's side effect runs at most once per job and business arguments."""
    gate = ToolGate(job, action, key_args, lookup, target, requires_approval, console)

    def decorate(fn):
        gate.action = gate.action or fn.__name__
        sig = inspect.signature(fn)

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            bound = sig.bind(*args, **kwargs)
            bound.apply_defaults()
            call_args = dict(bound.arguments)
            job_ = gate.job_for(_config())
            while True:
                try:
                    return gate.run(job_, call_args, lambda: fn(*args, **kwargs))
                except Halted as halted:
                    if halted.reason != "approval_required":
                        raise
                    interrupt(gate.request(job_, gate.call(job_, call_args)).as_dict())

        wrapper.gate = gate
        return wrapper

    return decorate
