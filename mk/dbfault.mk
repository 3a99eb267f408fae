# The ledger's own database fails (issue 35 part 4): a private PostgreSQL cluster of the suite
# (initdb on a small tmpfs, its own port; the machine's PostgreSQL on 5432 is never touched) behind
# a relay the test controls, the real ledger server on it and a second one on SQLite, real n8n
# 2.40.7 running Webhook -> Start Job -> Gated HTTP Request and a direct client, both writing to a
# counting remote. Faults: kill -9 of PostgreSQL mid begin / confirm / batch, the link cut after
# COMMIT, a full disk, PostgreSQL down for 30 s, SQLite locked past the busy timeout. Needs root
# (mount, and the server runs as the postgres user). About 2 minutes here (2 cores); the table
# of what was measured is printed and kept in $(DURABLE_CACHE)/dbfault-suite.md.

.PHONY: test-dbfault

test-dbfault: pipeline-deps
	bash stack/ensure-services.sh postgres
	$(PY) -m pytest -q -s -p no:cacheprovider tests/dbfault
