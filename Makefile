# Durable Steps: top-level tasks. Component fragments live in mk/*.mk.
SHELL := /bin/bash
VENV ?= $(CURDIR)/.venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
export DURABLE_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/durable-steps

.PHONY: setup deps prepare run test test-ledger lint clean
# `make test`: lint, then every suite below (each target's recipe is in mk/<name>.mk; the ledger's
# here), TEST_JOBS at a time by stack/run_suites.py, in this order: the longest first.
TEST_SUITES := \
  test-ledger \
  test-pipeline \
  test-node \
  test-orders \
  test-retry \
  test-dbfault \
  test-agent-tools \
  test-agent-frameworks \
  test-newcomer \
  test-n8n-matrix \
  test-wp-matrix \
  test-reconcile \
  test-lookups \
  test-scaleout \
  test-dist \
  test-acceptance \
  test-wordpress \
  test-demo
TEST_JOBS ?= 3
# Built once by `make prepare` before the suites start; each suite's make takes them as done (-o).
PREPARED := setup deps node-deps node-build n8n-install pipeline-deps reconcile-browser orders-deps \
  version-check dist

setup: $(VENV)/.installed

# Every system package (Debian) the suites need, in one step: stack/system-packages.sh.
deps:
	@bash stack/system-packages.sh

$(VENV)/.installed: ledger-service/pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e 'ledger-service[test]'
	touch $@

run: setup
	bash stack/run-ledger.sh

# Two workers (pytest-xdist): the suite waits on PostgreSQL and on servers it starts as much as it
# computes; each worker has its own database (tests/conftest.py).
LEDGER_WORKERS ?= 2
test-ledger: setup
	bash stack/ensure-services.sh
	cd ledger-service && $(PY) -m pytest -q -n $(LEDGER_WORKERS) --durations=15 tests

lint: setup
	$(VENV)/bin/ruff check --quiet --select F,E9,B006,B008 --target-version py311 ledger-service tests stack

-include mk/*.mk

# Everything the suites install or build, once, before any of them runs: two suites building
# dist/ (or installing the same n8n) at the same moment would pull it from under each other.
prepare: $(PREPARED) wp-cores n8n-versions
	bash stack/ensure-services.sh postgres mariadb redis

test: setup deps
	$(MAKE) --no-print-directory lint prepare
	$(PY) stack/run_suites.py --jobs $(TEST_JOBS) --logs $(CURDIR)/.suite-logs --prepared "$(PREPARED)" $(TEST_SUITES)

clean:
	rm -rf $(VENV) .pytest_cache .suite-logs
