# The newcomer suite (issue 24): the README's quickstart followed literally with the release
# artifacts (fresh venv from the wheel, the node tarball installed into a fresh n8n 2.40.7 with
# the quickstart's npm command), the smallest gated workflow built through n8n's REST API with
# the node's defaults only, run twice, killed mid-request and run again; counted at a local
# counting remote. Included by the top-level Makefile.
.PHONY: test-newcomer

test-newcomer: dist n8n-install
	$(PY) -m pytest -q -s -p no:cacheprovider tests/newcomer
