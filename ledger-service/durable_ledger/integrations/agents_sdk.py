"""Gated function tools for the OpenAI Agents SDK (extra ``durable-ledger[agents-sdk]``).

    refund = gated_tool(lambda ctx: ledger.job(ctx["job_id"], owner="refund-agent"),
                        action="refund", lookup=find_refund, requires_approval=True)

    @function_tool(needs_approval=refund.needs_approval)
    @refund
    def issue_refund(order_id: str, amount_cents: int) -> dict:
        return create_refund(order_id, amount_cents)        # {"remote_id": ..., ...} or (id, receipt)

The SDK builds the tool from the function as usual (name, docstring, schema); the wrapper adds a
run-context parameter the SDK fills (it is not in the schema) when the function has none, and
hands the context to the job factory. What the model gets back is the receipt
``{"remote_id", ...}`` (the same when an earlier call's receipt is reused), or, when the gate did
not let the call run, ``{"sent": False, "reason", "message", "operation_key", ...}`` with the
approval's digest and console page for approval_required.

``needs_approval`` asks the ledger: True when the gate answers approval_required for these
business arguments, so the run stops with an interruption. `approval_request(interruption)` gives
its operation key, digest and console link; approving it in the console (or with `approve(state,
interruption, approver)`, which records the approval bound to the digest and then approves the
call in the RunState) lets the resumed run dispatch. The SDK's own approval alone does not: the
gate still halts, and changed arguments are another operation, which needs its own approval.
"""

import asyncio
import functools
import inspect
import json
import typing
from typing import Any

from agents import RunContextWrapper

from ..client import StepBlocked
from .tools import ABSENT, UNDECIDABLE, Found, ToolGate, approve_request, current_operation_key

__all__ = ["gated_tool", "SdkToolGate", "Found", "ABSENT", "UNDECIDABLE", "approve_request", "current_operation_key"]


def gated_tool(job, action=None, key_args=None, lookup=None, target=None, requires_approval=False, console=None):
    """A decorator for a function that `function_tool` then turns into a tool. ``job``: a client
    `Job`, or a factory taking the run's context object (``RunContextWrapper.context``)."""
    return SdkToolGate(job, action, key_args, lookup, target, requires_approval, console)


def _is_context(annotation):
    if isinstance(annotation, str):
        return "RunContextWrapper" in annotation or "ToolContext" in annotation
    origin = typing.get_origin(annotation) or annotation
    return isinstance(origin, type) and issubclass(origin, RunContextWrapper)


def _jsonable(value):
    return value.model_dump(mode="json") if hasattr(value, "model_dump") else value


class SdkToolGate(ToolGate):
    def __init__(self, *args):
        super().__init__(*args)
        self._params, self.tool_name = None, None

    def _args(self, given):
        """The tool's arguments by name, defaults filled in (the same from the model's JSON and from
        the call), as JSON values."""
        out = {}
        for p in self._params:
            if p.name in given:
                out[p.name] = _jsonable(given[p.name])
            elif p.default is not inspect.Parameter.empty:
                out[p.name] = p.default
        return out

    def __call__(self, fn):
        self.action, self.tool_name = self.action or fn.__name__, fn.__name__
        sig = inspect.signature(fn)
        params = list(sig.parameters.values())
        takes_ctx = bool(params) and _is_context(params[0].annotation)
        self._params = params[1:] if takes_ctx else params

        def prepare(ctx, args, kwargs):
            bound = sig.bind(*((ctx,) if takes_ctx else ()), *args, **kwargs)
            return self._args(bound.arguments), ((ctx,) if takes_ctx else ()) + tuple(args)

        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def wrapper(ctx, *args, **kwargs):
                call_args, fn_args = prepare(ctx, args, kwargs)
                loop = asyncio.get_running_loop()

                def body():
                    return asyncio.run_coroutine_threadsafe(fn(*fn_args, **kwargs), loop).result()
                return await asyncio.to_thread(self._invoke, ctx, call_args, body)
        else:
            @functools.wraps(fn)
            def wrapper(ctx, *args, **kwargs):
                call_args, fn_args = prepare(ctx, args, kwargs)
                return self._invoke(ctx, call_args, lambda: fn(*fn_args, **kwargs))

        if not takes_ctx:
            ctx_param = inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                          annotation=RunContextWrapper[Any])
            wrapper.__signature__ = sig.replace(parameters=[ctx_param, *params])
            wrapper.__annotations__ = {"ctx": RunContextWrapper[Any], **fn.__annotations__}
        wrapper.gate = self
        return wrapper

    def _invoke(self, ctx, args, body):
        job = self.job_for(ctx.context)
        try:
            return self.run(job, args, body)
        except StepBlocked as blocked:
            out = {"sent": False, "reason": blocked.reason or blocked.decision, "message": blocked.message,
                   "operation_key": blocked.operation_key}
            if blocked.reason == "approval_required":
                req = self.request(job, self.call(job, args))
                out.update(digest=req.digest, console=req.console)
            return out

    @property
    def needs_approval(self):
        """The tool's ``needs_approval``: False for a tool that needs none, else a policy that
        asks the ledger about these business arguments."""
        return self._needs_approval if self.requires_approval else False

    async def _needs_approval(self, run_context, params, call_id):
        job = await asyncio.to_thread(self.job_for, run_context.context)
        return await asyncio.to_thread(self.approval_needed, job, self._args(params)) is not None

    def approval_request(self, interruption, context=None):
        """The ledger's `ApprovalRequest` behind an interruption of this tool (operation key,
        digest, console link), or None when the ledger no longer waits for one. ``context``: the
        run's context, for the job factory, when the interruption came from another process."""
        raw = interruption.raw_item
        get = raw.get if isinstance(raw, dict) else functools.partial(getattr, raw)
        job = self.job_for(context)
        return self.approval_needed(job, self._args(json.loads(get("arguments") or "{}")))

    def sync_approvals(self, state, context=None):
        """Approve in ``state`` each interruption of this tool the ledger no longer waits for
        (approved in the console, say); returns the `ApprovalRequest`s still waiting."""
        waiting = []
        for item in state.get_interruptions():
            if item.tool_name != self.tool_name:
                continue
            req = self.approval_request(item, context)
            if req is None:
                state.approve(item)
            else:
                waiting.append(req)
        return waiting

    def approve(self, state, interruption, approver, context=None, expires_in_s=None, note=None):
        """The SDK's approve, bound to the ledger: record an approval of the interruption's digest
        with ``approver`` (a ledger with the approver role), then approve the call in ``state``."""
        req = self.approval_request(interruption, context)
        if req is not None:
            approve_request(approver, req, expires_in_s, note)
        state.approve(interruption)
        return req
