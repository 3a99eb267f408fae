# The article pipeline (issue 8): workflows/article-pipeline.json in real n8n against a real
# WordPress, `make demo` (crash and recovery, with a report), `make up` / `make down`.
# Stack state lives in $(DURABLE_CACHE)/demo/, outside the repository.

.PHONY: demo up down test-pipeline pipeline-deps

# Everything the pipeline needs that is not Python: the built node package, Node 24, n8n 2.40.7.
pipeline-deps: setup node-build n8n-install

demo: pipeline-deps
	@$(PY) stack/demo.py demo

up: pipeline-deps
	@$(PY) stack/demo.py up

down:
	@$(PY) stack/demo.py down

test-pipeline: pipeline-deps reconcile-browser
	$(PY) -m pytest -q -s tests/pipeline
