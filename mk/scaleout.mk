# Scale-out (issue 9, part 4), n8n half: n8n 2.40.7 in queue mode (main + two workers, Redis,
# n8n on a throwaway PostgreSQL database) running the article pipeline for several jobs at once,
# one of them twice at the same moment; counted in WordPress. The two-ledger-process half lives
# in ledger-service/tests/test_concurrency.py.
# Reliable and about 35 s (boot 22 s), so it is part of `make test`.

.PHONY: test-scaleout

test-scaleout: pipeline-deps
	bash stack/ensure-services.sh postgres redis
	$(PY) -m pytest -q -s tests/scaleout
