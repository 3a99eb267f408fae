# Benchmarks (on demand, not part of `make test`): the gate vs the raw SQL floor vs DBOS.
# DBOS is a peer we measure against, never a dependency: it lives in its own venv in the cache.
BENCH_VENV ?= $(DURABLE_CACHE)/bench-venv
BENCH_ARGS ?=

.PHONY: bench bench-deps

bench-deps:
	@command -v wrk >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null; }
	@test -x $(BENCH_VENV)/bin/python || python3 -m venv $(BENCH_VENV)
	@$(BENCH_VENV)/bin/python -c "import dbos, psycopg2" 2>/dev/null || $(BENCH_VENV)/bin/pip install -q dbos psycopg2-binary

bench: setup bench-deps
	bash stack/ensure-services.sh postgres
	$(PY) tests/bench/run_bench.py --dbos-python $(BENCH_VENV)/bin/python $(BENCH_ARGS)
