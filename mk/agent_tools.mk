# Gated tools for n8n's AI Agent (issue 15, item 4): workflows/agent-tools.json (AI Agent + OpenAI
# Chat Model on the agent stand-in + Call n8n Workflow Tool) and its gated tool workflow
# workflows/agent-tools-refund-tool.json (a Gated Sub-Workflow running agent-tools-refund-create.json, with
# agent-tools-refund-find.json as its lookup), in real n8n 2.40.7, interrupted by SIGKILL and re-run;
# refunds counted at the refunds API. About 1.5-2.5 min warm (n8n CLI starts and the editor boot dominate).
# DURABLE_UPDATE_SCREENSHOTS=1 also writes docs/img/agent-tools*.png.

.PHONY: test-agent-tools

test-agent-tools: pipeline-deps reconcile-browser
	$(PY) -m pytest -q -s tests/agent_tools
