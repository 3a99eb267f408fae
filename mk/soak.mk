# Chaos soak (issue 9, part 2), on demand, not part of `make test`: SOAK_JOBS article jobs
# (default 50) through the real n8n pipeline against a real WordPress, interrupted at random
# points (SIGKILL of n8n, SIGKILL + restart of the ledger, dropped WordPress responses, two
# competing runners), re-run to the approval wait, swept; prints the JSON report (exit 1 if a
# counter is not 0). Bounded: SOAK_MAX_SECONDS (default 1800), SOAK_MAX_RUNS runs per job (5).
# SOAK_SEED makes the plan and the interruption points reproducible; SOAK_OUT=file keeps the JSON.
.PHONY: soak

soak: pipeline-deps
	$(PY) tests/soak/soak.py
