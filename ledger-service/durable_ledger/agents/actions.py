"""Required actions: answered from the side-effect ledger, never by re-executing.

A ``function_call`` is a business side effect. Its operation key comes from the business
action the handler derives from the arguments (``create_draft:article-42``), not from the
call_id: a retry in a new turn gets a new call_id but must find the same receipt.

    answer(call c1):  begin -> dispatch -> execute -> confirm(receipt has output)
                      outbox row (c1) -> events.create(tool_result c1)  x  connection lost
    answer(call c1):  begin -> reuse_receipt -> events.create(tool_result c1, same key)  ok

The result goes back under the call_id that asked for it, with an Idempotency-Key derived from
the session and call_id, so a delivery repeated after a lost response is one tool result.
``environment_connection`` is environment state (stored on the binding), never a business
function. MCP and computer-use approvals become operations that need an approval: the gate
halts them with ``approval_required`` and nothing is sent to the session.
"""

import json
import time
from dataclasses import dataclass
from typing import Callable, Optional

import openai

from .. import gate
from ..gate import outcomes as ops
from ..kernel import states as S
from ..kernel.errors import LedgerError
from ..kernel.secrets import redact
from ..store import sessions as session_store
from ..store import deliveries as delivery_store
from .openai_client import sessions


@dataclass
class FunctionResult:
    remote_id: str
    output: object  # str, or anything JSON-serialisable (sent as JSON text)


class FunctionFailed(Exception):
    """Raised by a handler when the remote refused in a way that proves nothing was written."""

    def __init__(self, message, retryable=True, http_status=None):
        super().__init__(message)
        self.retryable, self.http_status = retryable, http_status


@dataclass
class FunctionHandler:
    name: str
    action: Callable[[dict], str]  # business action from the arguments, e.g. "create_draft"
    execute: Callable[[dict], FunctionResult]
    target: Optional[str] = None


HANDLERS = {}


def register_function(name, action, execute, target=None):
    """Register how a function tool is executed (``action`` may be a string or a callable)."""
    derive = action if callable(action) else (lambda _args, _a=action: _a)
    HANDLERS[name] = FunctionHandler(name, derive, execute, target)
    return HANDLERS[name]


def _arguments(raw):
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return {"raw": raw}
    return raw if raw is not None else {}


def _output_text(output):
    return output if isinstance(output, str) else json.dumps(output, sort_keys=True, ensure_ascii=False)


def tool_result_key(session_id, call_id):
    return f"durable:{session_id}:tool_result:{call_id}"


def _deliver(client, binding, call_id, turn_id, op_key, output=None, error=None):
    """Outbox first (committed), then the send; a failed send leaves the row pending."""
    delivery_store.claim_delivery(binding.id, call_id, turn_id, op_key, time.time())
    event = {"type": "agent.session.input.tool_result", "call_id": call_id, "turn_id": turn_id,
             "success": error is None}
    if error is None:
        event["output"] = _output_text(output)
    else:
        event["error"] = error
    try:
        sessions(client).events.create(binding.session_id, events=[event],
                                       idempotency_key=tool_result_key(binding.session_id, call_id))
    except openai.APIError as exc:
        delivery_store.delivery_failed(binding.id, call_id, f"{type(exc).__name__}: {exc}"[:500])
        return "delivery_failed"
    delivery_store.delivery_done(binding.id, call_id)
    return "delivered"


def _function_call(principal, client, binding, job_id, action, token):
    out = {"type": "function_call", "call_id": action.call_id, "name": action.name}
    handler = HANDLERS.get(action.name)
    if handler is None:
        return {**out, "status": "no_handler"}
    args = _arguments(action.arguments)
    business_action = handler.action(args)
    result = gate.begin(principal, job_id, business_action, token, payload=args, target=handler.target)
    op = result.op
    out.update(decision=result.decision, operation_key=op.operation_key if op else None)
    if result.decision == S.REUSE_RECEIPT:
        out["executed"] = False
        out["status"] = _deliver(client, binding, action.call_id, action.turn_id, op.operation_key,
                                 output=redact(result.receipt).get("output"))
        return out
    if result.decision != S.DISPATCH:
        return {**out, "status": "waiting", "reason": result.reason}
    key = op.operation_key
    try:
        done = handler.execute(args)
    except FunctionFailed as exc:
        ops.fail(principal, key, token, exc.retryable, {"message": str(exc), "http_status": exc.http_status})
        out["status"] = _deliver(client, binding, action.call_id, action.turn_id, key, error=str(exc))
        return {**out, "executed": True}
    except Exception as exc:  # noqa: BLE001 - the side effect may have happened: outcome unknown
        ops.mark_unknown(principal, key, token, {"message": f"{type(exc).__name__}: {exc}"[:500]})
        return {**out, "executed": True, "status": "outcome_unknown"}
    ops.confirm(principal, key, token, done.remote_id, {"output": done.output, "call_id": action.call_id})
    out["executed"] = True
    out["status"] = _deliver(client, binding, action.call_id, action.turn_id, key, output=done.output)
    return out


def _approval(principal, action, job_id, token):
    request_id = action.request_id
    result = gate.begin(principal, job_id, f"{action.type}:{request_id}", token,
                        payload=action.request.to_dict(mode="json"), requires_approval=True,
                        target="openai:agents")
    op = result.op
    return {"type": action.type, "request_id": request_id, "turn_id": action.turn_id,
            "decision": result.decision, "reason": result.reason,
            "operation_key": op.operation_key if op else None, "status": "approval_required"
            if result.reason == "approval_required" else "waiting"}


def _environment(binding, action):
    env = {**(binding.environment or {}), "state": "connection_required",
           "reconnect_environment_id": action.environment_id}
    session_store.set_binding_environment(binding.id, env)
    binding.environment = env
    return {"type": "environment_connection", "environment_id": action.environment_id, "status": "environment_state"}


def answer_required_actions(principal, client, binding, job_id, session, fencing_token):
    """Handle every pending action of ``session`` (freshly retrieved). Returns one result per action."""
    results = []
    for action in session.required_actions:
        try:
            if action.type == "function_call":
                results.append(_function_call(principal, client, binding, job_id, action, fencing_token))
            elif action.type == "environment_connection":
                results.append(_environment(binding, action))
            else:
                results.append(_approval(principal, action, job_id, fencing_token))
        except LedgerError as exc:
            results.append({"type": action.type, "status": "refused", "error": exc.to_dict()["error"]})
    return results
