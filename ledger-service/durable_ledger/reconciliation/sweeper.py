"""The sweeper: reconcile what nobody came back for.

Operations stuck in SENT beyond a threshold (the caller died between dispatch and outcome),
UNKNOWN ones, and the in-flight operations of jobs with no update beyond a threshold. The
SENT threshold is what keeps the sweeper away from calls that are still in flight: it must
exceed the longest side effect's timeout. Rate-limited so a backlog does not hammer WordPress.
"""

import time

from ..kernel import states as S
from ..store import operations as op_store
from .apply import reconcile_operation


def candidates(sent_older_than_s, job_idle_s, limit, now):
    return op_store.stuck_operations(sent_older_than_s, job_idle_s, limit, now)


def sweep(sent_older_than_s=300, job_idle_s=3600, limit=500, rate_per_s=20.0, claim_s=60.0, now=None,
          actor="system:sweeper", sleep=time.sleep):
    started = time.time()
    now = started if now is None else now
    tally = {"examined": 0, "confirmed": 0, "retry_allowed": 0, "needs_review": 0, "errors": 0, "busy": 0,
             "raced": 0, "items": []}
    interval = 1.0 / rate_per_s if rate_per_s > 0 else 0
    for op in candidates(sent_older_than_s, job_idle_s, limit, now):
        t0 = time.time()
        outcome, verdict, after = reconcile_operation(op, actor, claim_s, escalate=True)
        tally["examined"] += 1
        if outcome in ("busy", "raced"):
            tally[outcome] += 1
        elif outcome == "error":
            tally["errors"] += 1
        elif after.state == S.CONFIRMED:
            tally["confirmed"] += 1
        elif after.state == S.FAILED:
            tally["retry_allowed"] += 1
        elif after.state == S.NEEDS_REVIEW:
            tally["needs_review"] += 1
        tally["items"].append({"operation_key": op.operation_key, "from": op.state, "to": after.state,
                               "outcome": outcome, "verdict": verdict})
        spent = time.time() - t0
        if interval > spent:
            sleep(interval - spent)
    tally["seconds"] = round(time.time() - started, 3)
    return tally
