# n8n's Retry of a crashed execution (issue 22, defect 10): real n8n 2.40.7 with "Save Execution
# Progress", SIGKILLed while a counting remote holds the write's answer, then Retry through n8n's
# REST API; the ledger must not confirm the second write (Record Outcome -> Needs Attention).
TEST_TARGETS += test-retry

.PHONY: test-retry

test-retry: pipeline-deps
	$(PY) -m pytest -q -s tests/retry
