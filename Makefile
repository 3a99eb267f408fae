# Durable Steps: top-level tasks. Component fragments live in mk/*.mk.
SHELL := /bin/bash
VENV ?= $(CURDIR)/.venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
export DURABLE_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/durable-steps

.PHONY: setup deps run test test-ledger lint clean
# `make test`: every suite, in this order (each target's recipe is in mk/<name>.mk; the ledger's here).
TEST_TARGETS := \
  lint \
  test-ledger \
  test-acceptance \
  test-agent-tools \
  test-demo \
  test-dist test-wp-matrix test-n8n-matrix \
  test-newcomer \
  test-node \
  test-orders \
  test-pipeline \
  test-reconcile \
  test-retry \
  test-scaleout \
  test-wordpress

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
	cd ledger-service && $(PY) -m pytest -q -n $(LEDGER_WORKERS) tests

lint: setup
	$(VENV)/bin/ruff check --quiet --select F,E9,B006,B008 --target-version py311 ledger-service tests stack

-include mk/*.mk

test: setup deps
	$(MAKE) --no-print-directory $(TEST_TARGETS)

clean:
	rm -rf $(VENV) .pytest_cache
