# The orders sample (issue 15, item 3): workflows/orders-pipeline.json (three Gated Sub-Workflow
# nodes) and its six sub-workflows in real n8n 2.40.7 against a real PostgreSQL, MariaDB and mail
# server (aiosmtpd -> Maildir -> Dovecot IMAP, from PyPI and Debian), interrupted at every boundary
# of every side effect and re-run; counted in the remotes and in n8n's execution table.
# DURABLE_UPDATE_SCREENSHOTS=1 refreshes docs/img/orders-pipeline.png and orders-email-find.png.

.PHONY: test-orders orders-deps

orders-deps: pipeline-deps reconcile-browser
	@$(PY) -c 'import aiosmtpd' 2>/dev/null || $(PIP) install -q aiosmtpd

test-orders: orders-deps
	$(PY) -m pytest -q -s tests/orders
