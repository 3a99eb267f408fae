# Gated tools in the OpenAI Agents SDK and LangGraph (durable_ledger/integrations/): each framework
# installed from its extra (durable-ledger[agents-sdk], durable-ledger[langgraph]), driven offline by a
# scripted model (or none), killed -9 after the remote write and resumed from its saved RunState /
# checkpoint; writes counted at a local refunds API. LocalLedger on SQLite and PostgreSQL, HttpLedger
# against `durable-ledger serve`.

.PHONY: test-agent-frameworks agent-frameworks-deps

agent-frameworks-deps: setup
	@$(PY) -c 'import agents, langgraph.checkpoint.sqlite, langgraph.checkpoint.postgres' 2>/dev/null || \
	  $(PIP) install -q -e 'ledger-service[agents-sdk,langgraph]'

test-agent-frameworks: agent-frameworks-deps
	bash stack/ensure-services.sh postgres
	$(PY) -m pytest -q -n 4 --durations=8 tests/agent_frameworks
