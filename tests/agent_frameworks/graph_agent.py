"""The refund graph on LangGraph, as a process the tests start, kill and resume.

    python graph_agent.py '{"ledger": URL, "token": T, "remote": URL, "thread": J, "saver": "sqlite:PATH",
                            "gated": true, "approval": true, "order": {...}, "twice": false, "mode": "run"}'

One node, "refund", refunds the order (twice over when ``twice``: the same business arguments
asked again in one run). With ``approval`` it asks first with ``interrupt()``: the gated tool's
interrupt carries the ledger's request; the plain one interrupts with the arguments. mode run
starts the thread; resume goes on with ``Command(resume=..., update=update)``. The checkpointer
is SqliteSaver (``sqlite:PATH``) or PostgresSaver (``postgres:URL``). Prints one JSON line: the
receipts and the pending interrupts.
"""

import contextlib
import functools
import json
import operator
import sys
from typing import Annotated, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

import agent_common
from durable_ledger.integrations.langgraph import approve_request, gated_tool


class Refund(TypedDict):
    order_id: str
    amount_cents: int
    receipts: Annotated[list, operator.add]


def open_ledger(cfg, token_key="token"):
    return agent_common.open_ledger(cfg, "graph-agent", token_key)


def refund_function(cfg):
    create_refund, find_refund = agent_common.refunds_api(cfg["remote"])

    if not cfg["gated"]:
        def issue_refund(order_id: str, amount_cents: int) -> dict:
            if cfg["approval"]:
                interrupt({"approve": {"order_id": order_id, "amount_cents": amount_cents}})
            return create_refund(order_id, amount_cents)
        return issue_refund

    ledger = open_ledger(cfg)
    job = functools.cache(lambda thread: ledger.job(thread, owner="refund-graph"))

    @gated_tool(lambda config: job(config["configurable"]["thread_id"]), action="refund", lookup=find_refund,
                requires_approval=cfg["approval"])
    def issue_refund(order_id: str, amount_cents: int) -> dict:
        return create_refund(order_id, amount_cents)
    return issue_refund


@contextlib.contextmanager
def saver(spec):
    kind, _, where = spec.partition(":")
    if kind == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver
        with SqliteSaver.from_conn_string(where) as s:
            yield s
    else:
        from langgraph.checkpoint.postgres import PostgresSaver
        with PostgresSaver.from_conn_string(where) as s:
            s.setup()
            yield s


def main(cfg):
    issue_refund = refund_function(cfg)

    def refund(state):
        receipts = [issue_refund(state["order_id"], state["amount_cents"])]
        if cfg.get("twice"):
            receipts.append(issue_refund(state["order_id"], state["amount_cents"]))
        return {"receipts": receipts}

    builder = StateGraph(Refund)
    builder.add_node("refund", refund)
    builder.add_edge(START, "refund")
    builder.add_edge("refund", END)
    config = {"configurable": {"thread_id": cfg["thread"]}}
    with saver(cfg["saver"]) as checkpointer:
        graph = builder.compile(checkpointer=checkpointer)
        if cfg["mode"] == "run":
            graph.invoke({**cfg["order"], "receipts": []}, config)
        elif cfg["mode"] == "approve":  # an approver, for what the pending interrupts ask
            approver = open_ledger(cfg, "approver_token")
            for pending in graph.get_state(config).interrupts:
                approve_request(approver, pending.value)
        else:
            graph.invoke(Command(resume="approved", update=cfg.get("update")), config)
        snap = graph.get_state(config)
        print(json.dumps({"receipts": snap.values.get("receipts", []),
                          "interrupts": [i.value for i in snap.interrupts]}, default=str), flush=True)


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
