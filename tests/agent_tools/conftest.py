"""Gated tools for n8n's AI Agent (issue 15, item 4), end to end in real n8n 2.40.7:
workflows/agent-tools.json (AI Agent + OpenAI Chat Model + Call n8n Workflow Tool) calling
workflows/agent-tools-refund-tool.json (Start Job -> Issue Refund, a Gated Sub-Workflow running
workflows/agent-tools-refund-create.json, with workflows/agent-tools-refund-find.json as its lookup), against the OpenAI agent stand-in and a refunds API that counts what it creates.
One stack per session; every test uses its own refund (own operation key) and its own copy of the
agent workflow, all imported at once (each n8n CLI start costs seconds)."""
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent

from agent_stack import AgentToolStack  # noqa: E402

# test name -> the refund request its agent run handles (each one a different operation key,
# except "conflict", which asks for refund RF-3001 again with another amount).
REQUESTS = {
    "three": {"customer_id": "C-1042", "refund_id": "RF-3001", "amount_cents": 2500, "currency": "EUR"},
    "afterwrite": {"customer_id": "C-2077", "refund_id": "RF-3002", "amount_cents": 1299, "currency": "EUR"},
    "beforesend": {"customer_id": "C-3150", "refund_id": "RF-3003", "amount_cents": 800, "currency": "USD"},
    "parallel": {"customer_id": "C-4201", "refund_id": "RF-3004", "amount_cents": 4200, "currency": "EUR"},
    "conflict": {"customer_id": "C-1042", "refund_id": "RF-3001", "amount_cents": 9900, "currency": "EUR"},
}


def workflow_id(name: str) -> str:
    return f"dsAgent{name}"


@pytest.fixture(scope="session")
def stack(tmp_path_factory):
    st = AgentToolStack(tmp_path_factory.mktemp("agent-tools"), say=lambda m: print(f"[agent-tools] {m}"))
    try:
        st.start()
        st.import_workflows(st.tool_workflows() + [st.agent_workflow(workflow_id(n), r, parallel=n == "parallel")
                                               for n, r in REQUESTS.items()], publish=st.PUBLISHED)
        yield st
    finally:
        st.stop()
