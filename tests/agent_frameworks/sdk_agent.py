"""The refund agent on the OpenAI Agents SDK, as a process the tests start, kill and resume.

    python sdk_agent.py '{"ledger": URL, "token": T, "remote": URL, "job_id": J, "state": PATH,
                          "gated": true, "approval": true, "calls": [{...}], "mode": "run"}'

mode run: a new run; resume: load the RunState saved at the last interruption and go on
(approve: "sdk" approves the calls in the RunState only, "ledger" with the SDK's approve bound to
the ledger (an approver token), "synced" those the ledger approved (in the console)). The model is
scripted: it asks for ``calls`` one per turn (a new call id each time), then says done. Prints one
JSON line: the tool outputs, the interruptions (with the ledger's approval requests), the final output.
"""

import functools
import json
import sys
import uuid
from pathlib import Path

from agents import Agent, ModelResponse, RunState, Runner, Usage, function_tool, set_tracing_disabled
from agents.items import ToolCallOutputItem
from agents.models.interface import Model
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

import agent_common
from durable_ledger.integrations.agents_sdk import approve_request, gated_tool


class ScriptedModel(Model):
    """Asks for the next planned tool call until each has an output, then answers 'done'."""

    def __init__(self, calls, tool="issue_refund"):
        self.calls, self.tool = calls, tool

    async def get_response(self, system_instructions, input, model_settings, tools, output_schema, handoffs,
                           tracing, **kw):
        items = input if isinstance(input, list) else []
        done = sum(1 for i in items if isinstance(i, dict) and i.get("type") == "function_call_output")
        if done < len(self.calls):
            out = [ResponseFunctionToolCall(type="function_call", name=self.tool, arguments=json.dumps(self.calls[done]),
                                            call_id=f"call_{uuid.uuid4().hex}", id=f"fc_{uuid.uuid4().hex}")]
        else:
            out = [ResponseOutputMessage(id=f"msg_{uuid.uuid4().hex}", type="message", role="assistant",
                                         status="completed",
                                         content=[ResponseOutputText(type="output_text", text="done", annotations=[])])]
        return ModelResponse(output=out, usage=Usage(), response_id=None)

    async def stream_response(self, *args, **kw):
        raise NotImplementedError
        yield


def open_ledger(cfg, token_key="token"):
    return agent_common.open_ledger(cfg, "sdk-agent", token_key)


def build(cfg):
    create_refund, find_refund = agent_common.refunds_api(cfg["remote"])

    if not cfg["gated"]:
        @function_tool(needs_approval=bool(cfg["approval"]))
        def issue_refund(order_id: str, amount_cents: int) -> dict:
            """Refund an order."""
            return create_refund(order_id, amount_cents)
        return issue_refund, None

    ledger = open_ledger(cfg)
    job = functools.cache(lambda job_id: ledger.job(job_id, owner="refund-agent"))
    refund = gated_tool(lambda ctx: job(ctx["job_id"]), action="refund", key_args=["order_id", "amount_cents"],
                        lookup=find_refund, requires_approval=cfg["approval"])

    @function_tool(needs_approval=refund.needs_approval)
    @refund
    def issue_refund(order_id: str, amount_cents: int, note: str = "") -> dict:
        """Refund an order."""
        return create_refund(order_id, amount_cents)
    return issue_refund, refund


def main(cfg):
    set_tracing_disabled(True)
    tool, gate = build(cfg)
    agent = Agent(name="refunds", instructions="Refund what is asked.", model=ScriptedModel(cfg["calls"]),
                  tools=[tool])
    context = {"job_id": cfg["job_id"]}
    if cfg["mode"] == "run":
        result = Runner.run_sync(agent, "Refund the orders.", context=context, max_turns=12)
    else:
        state = RunState.from_string_sync(agent, Path(cfg["state"]).read_text()) if hasattr(
            RunState, "from_string_sync") else _load(agent, cfg["state"])
        if cfg.get("approve") == "sdk":
            for item in state.get_interruptions():
                state.approve(item)
        elif cfg.get("approve") == "ledger":
            approver = open_ledger(cfg, "approver_token")
            for item in state.get_interruptions():
                gate.approve(state, item, approver, context)
        elif cfg.get("approve") == "synced":
            gate.sync_approvals(state, context)
        elif cfg.get("approve") == "ledger-only":  # an approver in the console: the run stays where it is
            approver = open_ledger(cfg, "approver_token")
            reqs = [gate.approval_request(item, context) for item in state.get_interruptions()]
            for req in reqs:
                approve_request(approver, req)
            print(json.dumps({"approved": [r.as_dict() for r in reqs]}), flush=True)
            return
        result = Runner.run_sync(agent, state, max_turns=12)
    out = {"outputs": [i.output for i in result.new_items if isinstance(i, ToolCallOutputItem)],
           "interruptions": [], "final": result.final_output}
    if result.interruptions:
        Path(cfg["state"]).write_text(result.to_state().to_string())
        for item in result.interruptions:
            req = gate.approval_request(item, context) if gate else None
            out["interruptions"].append({"tool": item.tool_name, "arguments": json.loads(item.raw_item.arguments),
                                         "ledger": req.as_dict() if req else None})
    print(json.dumps(out, default=str), flush=True)


def _load(agent, path):
    import asyncio
    return asyncio.run(RunState.from_string(agent, Path(path).read_text()))


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
