# Reconciliation of UNKNOWN outcomes and the editors' review queue (issue 5).
# Included by the top Makefile. The suite starts two throwaway WordPress sites (with and without
# the durable-ops mu-plugin), a real ledger and a real publishing proxy, SIGKILLs callers between
# steps, and drives the review page in Debian's headless Chromium (no browser or driver download).
# `make reconcile-batch` prints the 50-operation measurement as JSON.
BATCH_N ?= 50

.PHONY: test-reconcile reconcile-browser reconcile-batch

reconcile-browser: deps
	@# selenium is in ledger-service's [test] extra; this covers a venv made before it was added.
	@$(PY) -c 'import selenium' 2>/dev/null || $(PIP) install -q selenium

test-reconcile: setup reconcile-browser
	$(PY) -m pytest -q -s tests/reconcile

reconcile-batch: setup
	PYTHONPATH=tests:ledger-service:stack $(PY) tests/reconcile/batch_interrupted.py --n $(BATCH_N)
