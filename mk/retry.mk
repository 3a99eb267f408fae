# n8n's own retry buttons never repeat a side effect (issue 22, defect 10; issue 23): real n8n
# 2.40.7 and the real ledger against a local remote that counts every write per order, for plain
# n8n, Begin Step + Record Outcome and the Gated HTTP Request. Retry On Fail, "Retry execution"
# (REST API), kill -9 + re-run + Retry with Save Execution Progress off and on, the same trigger
# twice, and queue mode (a worker SIGSTOPped past its Bull lock, Redis + PostgreSQL). One n8n per
# module; 2 to 4 minutes here (2 cores). The table of what was measured: $(DURABLE_CACHE)/retry-suite.md.

.PHONY: test-retry

test-retry: pipeline-deps
	bash stack/ensure-services.sh postgres redis
	$(PY) -m pytest -q -s tests/retry
