# OpenAI Agents API session control (ledger-service/durable_ledger/agents): its own test target.
.PHONY: test-agents

test-agents: setup
	bash stack/ensure-services.sh
	cd ledger-service && $(PY) -m pytest -q tests/test_agents_*.py
