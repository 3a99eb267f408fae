# Fault-injection acceptance suite (issue 9, part 1): one test per interruption scenario, against
# a real ledger (SQLite, and PostgreSQL for the restart scenario), the publishing proxy, a real
# WordPress with the durable-ops plugin and the Agents API stand-in; clients, server workers
# and whole servers are SIGKILLed. CI-sized: the whole suite stays well under 3 minutes.

.PHONY: test-acceptance

test-acceptance: setup
	bash stack/ensure-services.sh
	$(PY) -m pytest -q -s tests/acceptance
