# Chaos soak (issue 9, part 2; issue 12, item 7), on demand, not part of `make test`: SOAK_JOBS
# article jobs (default 50) through the real n8n pipeline against a real WordPress, interrupted at
# random points (SIGKILL of n8n, SIGKILL + restart of the ledger, dropped WordPress responses, two
# competing runners, hostile runners sending forged writes straight to the publishing proxy: a
# runner of another tenant and a fenced-out runner of the same tenant), re-run to the approval
# wait, swept; prints the JSON report (exit 1 if a counter is not 0, forged_accepted included, or
# a forged write that got an answer was not refused). Bounded: SOAK_MAX_SECONDS (default 1800),
# SOAK_MAX_RUNS runs per job (5). SOAK_SEED makes the plan and the interruption points
# reproducible; SOAK_OUT=file keeps the JSON.
# Options (defaults first): SOAK_BACKEND=sqlite|postgres (the ledger's database; postgres: a
# database unique to the run, dropped at the end), SOAK_N8N=regular|queue (queue: n8n main + 2
# workers on Redis, n8n on its own unique PostgreSQL database), SOAK_HOSTILE=kind|all (hostile
# runners on the `hostile` jobs only, or during every job's runs); soak.py runs
# stack/ensure-services.sh for PostgreSQL / Redis when they are needed. For example:
#   SOAK_BACKEND=postgres SOAK_N8N=queue SOAK_JOBS=20 make soak
.PHONY: soak

soak: pipeline-deps
	PYTHONPATH=tests:stack $(PY) tests/soak/soak.py
