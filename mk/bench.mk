# Benchmarks (on demand, not part of `make test`): the gate vs the raw SQL floor vs DBOS.
# DBOS is a peer we measure against, never a dependency: it lives in its own venv in the cache.
BENCH_VENV ?= $(DURABLE_CACHE)/bench-venv
BENCH_ARGS ?=

.PHONY: bench bench-deps

bench-deps:
	@command -v wrk >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null; }
	@test -x $(BENCH_VENV)/bin/python || python3 -m venv $(BENCH_VENV)
	@$(BENCH_VENV)/bin/python -c "import dbos, psycopg2" 2>/dev/null || $(BENCH_VENV)/bin/pip install -q dbos psycopg2-binary

bench: setup bench-deps node-build n8n-install
	bash stack/ensure-services.sh postgres
	@rm -f $(DURABLE_CACHE)/bench-n8n.json
	@echo "[bench] Durable Step overhead inside real n8n executions" >&2
	@$(NODE_ENV) DURABLE_BENCH_RUNS=$${DURABLE_BENCH_RUNS:-7} DURABLE_E2E_RESULTS=$(DURABLE_CACHE)/bench-n8n.json \
	  node --test --test-concurrency=1 --test-name-pattern=measure tests/n8n/e2e.test.mjs >&2
	$(PY) tests/bench/run_bench.py --dbos-python $(BENCH_VENV)/bin/python --n8n-results $(DURABLE_CACHE)/bench-n8n.json $(BENCH_ARGS)
