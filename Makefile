# Durable Steps: top-level tasks. Component fragments live in mk/*.mk.
SHELL := /bin/bash
VENV ?= $(CURDIR)/.venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
export DURABLE_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/durable-steps

.PHONY: setup run test test-ledger lint clean
TEST_TARGETS := test-ledger

setup: $(VENV)/.installed

$(VENV)/.installed: ledger-service/pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e 'ledger-service[test]'
	touch $@

run: setup
	bash stack/run-ledger.sh

test-ledger: setup
	bash stack/ensure-services.sh
	cd ledger-service && $(PY) -m pytest -q tests

lint: setup
	$(PY) -m pyflakes ledger-service/durable_ledger ledger-service/tests tests 2>/dev/null || $(PY) -m compileall -q ledger-service/durable_ledger

-include mk/*.mk

test: setup
	$(MAKE) --no-print-directory $(TEST_TARGETS)

clean:
	rm -rf $(VENV) .pytest_cache
