# Lookups that decide only on proof (issue 35 part 3): real n8n 2.40.7 with the package installed as
# users install it, the real ledger (SQLite) and a local remote that counts writes and answers
# lookups as real APIs do (a plain object, bare / wrapped / paginated / Stripe-style lists, an
# ignored filter, a 200 error object, HTML pages, a slow answer), through the Gated HTTP Request's
# Look Up, a Gated Sub-Workflow's HTTP Request + Set lookup, and the ledger's generic HTTP
# reconciler. The table: $(DURABLE_CACHE)/lookups-suite.md. The same cases against the node before
# the match rule (not in CI): $(PY) tests/lookups/before_after.py.
.PHONY: test-lookups

test-lookups: pipeline-deps
	$(PY) -m pytest -q -s tests/lookups
