"""The gated-agent-tool sample's stack as processes (no WordPress):

    n8n execute: AI Agent ──▶ OpenAI agent stand-in (stack/openai_agent_standin.py: scripted tool calls)
                    │
                    └─ tool issue_refund ─▶ sub-workflow: Start Job ─▶ Issue Refund (Gated Sub-Workflow) ─▶ ledger
                                                   └─▶ sub-workflows Create Refund / Find Refund ─▶ FaultRelay ─▶ refunds API
                                                       (refund_service.py, counts creates)

Built on stack/pipeline_stack.py's PipelineStack (its n8n helpers: package install, credentials,
import, `execute` with a relay trap and SIGKILL of the whole n8n process group).
"""
from __future__ import annotations

import copy
import json
import os
import sys
from pathlib import Path

import requests

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
from fault_relay import FaultRelay  # noqa: E402
from pipeline_stack import (  # noqa: E402
    CRED_OPENAI, SITE, TENANT, PipelineStack, Service, free_port, outputs_of, wait_http)

AGENT_FILE = REPO / "workflows" / "agent-tools.json"
TOOL_FILE = REPO / "workflows" / "agent-tools-refund-tool.json"
# the tool's side effect and its lookup, run by the tool's Gated Sub-Workflow node
SUB_FILES = (REPO / "workflows" / "agent-tools-refund-create.json", REPO / "workflows" / "agent-tools-refund-find.json")
SHIPPED_REFUNDS_URL = "http://127.0.0.1:8790"   # what the shipped sub-workflows point at
TOOL_WORKFLOW_ID = "dsRefundTool"
SUB_WORKFLOW_IDS = ("dsRefundCreate", "dsRefundFind")


class AgentToolStack(PipelineStack):
    def start(self):
        self._start_ledger()
        self._start_openai()
        self._start_refunds()
        self.relay = FaultRelay(self.refunds_url)
        self._prepare_n8n()
        return self

    def _start_ledger(self):
        t = self.tokens
        self.start_ledger(f"sqlite:///{self.workdir / 'ledger.db'}",
                          f"{TENANT}:runner:{t['runner']}:{SITE},{TENANT}:editor:{t['editor']}")

    def _start_openai(self):
        port = free_port()
        self.openai_url = f"http://127.0.0.1:{port}/v1"
        self.say(f"OpenAI agent stand-in (scripted tool calls, not OpenAI) on {self.openai_url}")
        svc = Service("openai-agent-standin", [sys.executable, str(REPO / "stack" / "openai_agent_standin.py"),
                                               "--port", str(port), "--tool-calls", "3"],
                      dict(os.environ), self.workdir / "openai-standin.log")
        self.services.append(svc)
        wait_http(f"http://127.0.0.1:{port}/health", proc=svc.proc, log=svc.log_path)

    def _start_refunds(self):
        port = free_port()
        self.refunds_url = f"http://127.0.0.1:{port}"
        self.say(f"refunds API (counts creates) on {self.refunds_url}")
        svc = Service("refunds", [sys.executable, str(HERE / "refund_service.py"), "--port", str(port)],
                      dict(os.environ), self.workdir / "refunds.log")
        self.services.append(svc)
        wait_http(self.refunds_url + "/health", proc=svc.proc, log=svc.log_path)

    def openai_credential(self) -> dict:
        """n8n's own OpenAI credential for the agent's OpenAI Chat Model, on the agent stand-in."""
        return {**CRED_OPENAI, "type": "openAiApi", "data": {"apiKey": "standin-key", "url": self.openai_url}}

    def n8n_env(self) -> dict:
        # n8n 2.x runs the PUBLISHED version of a sub-workflow outside manual runs. `n8n publish:workflow`
        # sets the workflow's active version; the publication service (on by default) serves from a table
        # that only a running `n8n start` fills through its outbox. CLI runs read the active version:
        return {**super().n8n_env(), "N8N_USE_WORKFLOW_PUBLICATION_SERVICE": "false"}

    # ------------------------------------------------------------------ workflows

    def tool_workflows(self) -> list[dict]:
        """The shipped tool workflow and its two sub-workflows, the refunds API URL pointed at this stack's relay."""
        return [json.loads(f.read_text().replace(SHIPPED_REFUNDS_URL, self.relay.url)) for f in (TOOL_FILE, *SUB_FILES)]

    def agent_workflow(self, workflow_id: str, request: dict, parallel: bool = False) -> dict:
        """The shipped agent workflow with this refund request (customer_id, refund_id, amount_cents,
        currency). ``parallel``: the stand-in makes its three calls in one turn (parallel tool calls)."""
        wf = copy.deepcopy(json.loads(AGENT_FILE.read_text()))
        if parallel:
            agent = next(n for n in wf["nodes"] if n["name"] == "AI Agent")
            text = agent["parameters"]["text"]
            assert text.endswith(" }}"), text
            agent["parameters"]["text"] = text[:-3] + " + '\\nstandin_parallel: true' }}"
        wf["id"], wf["name"] = workflow_id, f"{wf['name']} [{request['refund_id']}]"
        node = next(n for n in wf["nodes"] if n["name"] == "Refund Request")
        for a in node["parameters"]["assignments"]["assignments"]:
            if a["name"] in request:
                a["value"] = request[a["name"]]
        return wf

    PUBLISHED = (TOOL_WORKFLOW_ID, *SUB_WORKFLOW_IDS)  # the tool workflow and its sub-workflows

    # ------------------------------------------------------------------ counted at the remote

    def refunds(self, **query) -> list[dict]:
        r = requests.get(self.refunds_url + "/v1/refunds", params=query, timeout=10)
        r.raise_for_status()
        return r.json()["data"]

    def standin_requests(self) -> list[dict]:
        return requests.get(self.openai_url.rsplit("/v1", 1)[0] + "/standin/requests", timeout=10).json()["requests"]


def agent_output(run: dict) -> str:
    (items,) = outputs_of(run, "AI Agent")[:1]
    return items[0]["output"]


def tool_calls(run: dict) -> list[dict]:
    """What each tool call returned to the agent, in order (the tool node's ai_tool output per run)."""
    runs = run["data"]["resultData"]["runData"].get("issue_refund") or []
    out = []
    for r in runs:
        data = (r.get("data") or {}).get("ai_tool") or [[]]
        out.append({"input": ((r.get("inputOverride") or {}).get("ai_tool") or [[{}]])[0][0].get("json"),
                    "output": [it["json"] for it in (data[0] or [])]})
    return out
