# Benchmarks (on demand, not part of `make test`): the gate vs the raw SQL floor vs DBOS.
# DBOS is a peer we measure against, never a dependency: it lives in its own venv in the cache.
# `make bench` prints one JSON document (tests/bench/run_bench.py --help for the options):
#   make bench BENCH_ARGS="--baseline <ref>"   also the HTTP gate of <ref>, interleaved (= make bench-compare BASELINE=<ref>)
#   make bench-quick                           short development run: no n8n, no server table, 2 s runs, 1 pass, 10k point
#   make bench-servers                         the server table alone (PostgreSQL): serve vs gunicorn, granian, a92532a
# The n8n section: DURABLE_BENCH_RUNS rounds (default 21), DURABLE_BENCH_STEPS gated steps in the
# n-step workflows (default 5), DURABLE_BENCH_BASELINE_TARBALL=<older package .tgz> measures that
# package too, in its own n8n in the same rounds (before/after). Each of those runs is a new
# `n8n execute` process; `make bench-n8n-server` (part of `make bench`, JSON under n8n_server)
# measures the same steps in a running `n8n start` server fed by production webhooks.
BENCH_VENV ?= $(DURABLE_CACHE)/bench-venv
BENCH_ARGS ?=
BENCH_QUICK_ARGS ?= --seconds 2 --passes 1 --scale-max 10000 --servers ''
BASELINE ?=

.PHONY: bench bench-deps bench-compare bench-quick bench-n8n-server bench-servers

# The server table's candidates besides `serve` (tests/bench/servers_bench.py), bench-only: in a
# directory of their own on the candidates' PYTHONPATH, never in the project's venv.
BENCH_SERVERS ?= $(DURABLE_CACHE)/bench-servers

bench-deps: deps setup
	@test -x $(BENCH_VENV)/bin/python || python3 -m venv $(BENCH_VENV)
	@$(BENCH_VENV)/bin/python -c "import dbos, psycopg2" 2>/dev/null || $(BENCH_VENV)/bin/pip install -q dbos psycopg2-binary
	@test -d $(BENCH_SERVERS)/gunicorn -a -d $(BENCH_SERVERS)/granian \
	  || $(PIP) install -q --target $(BENCH_SERVERS) 'gunicorn>=23,<28' 'granian>=2.8,<3'

# stdout carries only the JSON document (`make bench > bench.json`): everything else goes to stderr.
bench:
	@$(MAKE) --no-print-directory setup bench-deps node-build n8n-install >&2
	@bash stack/ensure-services.sh postgres >&2
	@rm -f $(DURABLE_CACHE)/bench-n8n.json
	@echo "[bench] Durable Step overhead inside real n8n executions" >&2
	@$(NODE_ENV) DURABLE_BENCH_RUNS=$${DURABLE_BENCH_RUNS:-21} DURABLE_E2E_RESULTS=$(DURABLE_CACHE)/bench-n8n.json \
	  node --test --test-concurrency=1 --test-name-pattern=measure tests/n8n/e2e.test.mjs >&2 \
	  || echo "[bench] the n8n measurement failed: the JSON says so under n8n" >&2
	@rm -f $(DURABLE_CACHE)/bench-n8n-server.json
	@echo "[bench] the same steps in a running n8n server (n8n start, production webhooks)" >&2
	@$(MAKE) --no-print-directory bench-n8n-server BENCH_N8N_SERVER_OUT=$(DURABLE_CACHE)/bench-n8n-server.json >/dev/null \
	  || echo "[bench] the n8n server measurement failed: the JSON says so under n8n_server" >&2
	@PYTHONPATH=ledger-service/tests:stack $(PY) tests/bench/run_bench.py --dbos-python $(BENCH_VENV)/bin/python --n8n-results $(DURABLE_CACHE)/bench-n8n.json \
	  --servers-path $(BENCH_SERVERS) --n8n-server-results $(DURABLE_CACHE)/bench-n8n-server.json $(BENCH_ARGS)

# The n8n server half alone (about 2 min): prints its JSON.
bench-n8n-server:
	@$(MAKE) --no-print-directory pipeline-deps >&2
	@PYTHONPATH=tests/retry:tests:stack $(PY) tests/bench/n8n_server_bench.py $(if $(BENCH_N8N_SERVER_OUT),--out $(BENCH_N8N_SERVER_OUT))

bench-compare:
	@test -n "$(BASELINE)" || { echo "usage: make bench-compare BASELINE=<git ref> [BENCH_ARGS=...]" >&2; exit 2; }
	@$(MAKE) --no-print-directory bench BENCH_ARGS="--baseline $(BASELINE) $(BENCH_ARGS)"

bench-quick:
	@$(MAKE) --no-print-directory setup bench-deps >&2
	@bash stack/ensure-services.sh postgres >&2
	@PYTHONPATH=ledger-service/tests:stack $(PY) tests/bench/run_bench.py --dbos-python $(BENCH_VENV)/bin/python $(BENCH_QUICK_ARGS) $(BENCH_ARGS)

bench-servers:
	@$(MAKE) --no-print-directory setup bench-deps >&2
	@bash stack/ensure-services.sh postgres >&2
	@PYTHONPATH=ledger-service/tests:stack $(PY) tests/bench/run_bench.py --servers-only --servers-path $(BENCH_SERVERS) $(BENCH_ARGS)
