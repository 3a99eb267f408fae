"""Per-job budgets: wall-clock deadline, cost, tool calls, resume attempts; retry backoff."""

import time

from ..models import OperationEvent


# Budgets whose check reads rows other claims write (the dispatch count, the job's cost): a
# claim must hold the job row exclusively while it counts, or N concurrent claims all count
# the same "2 of 3 used" and all dispatch (see `dispatch_refusal`).
COUNTED = ("max_tool_calls", "max_cost")


def counted(budgets):
    return any((budgets or {}).get(k) is not None for k in COUNTED)


def tool_calls_used(job):
    """Dispatches so far (every move into SENT). Counted from the event log instead of a
    counter on the job row: a counter would make every dispatch of a job update one row, which
    serialises concurrent begins of the same job on that row's lock."""
    return count_dispatches(job.id)


def count_dispatches(job_pk):
    return OperationEvent.select().where(OperationEvent.job == job_pk, OperationEvent.to_state == "SENT").count()


def dispatch_refusal(job_pk, status, halt_reason, budgets, cost, created_at, now=None):
    """Why a new dispatch of this job must not happen, as (reason, budget) or None.

    Called *inside* the claim's write transaction, with the values read there under the job
    row's lock (FOR UPDATE when a counted budget is set, FOR SHARE otherwise, on PostgreSQL;
    SQLite's IMMEDIATE lock serialises every writer). Checked before the claim instead, two
    windows stay open:

        begin A: job active, 2/3 calls ..................... INSERT SENT (3/3)
        begin B:        job active, 2/3 calls ......................... INSERT SENT (4/3)
        cancel:                  status=cancelled (commit)  ...  begin C (read before): INSERT SENT
    """
    if status in ("cancelled", "halted"):
        return (halt_reason or status), None
    b = budgets or {}
    now = time.time() if now is None else now
    if b.get("deadline_s") is not None and now - created_at >= float(b["deadline_s"]):
        return "budget_exhausted", "deadline_s"
    if b.get("max_cost") is not None and (cost or 0) >= float(b["max_cost"]):
        return "budget_exhausted", "max_cost"
    if b.get("max_tool_calls") is not None and count_dispatches(job_pk) >= int(b["max_tool_calls"]):
        return "budget_exhausted", "max_tool_calls"
    return None


def exhausted(job, now=None, for_resume=False):
    """The name of the first exhausted budget, or None."""
    b = job.budgets or {}
    now = time.time() if now is None else now
    if b.get("deadline_s") is not None and now - job.created_at >= float(b["deadline_s"]):
        return "deadline_s"
    if b.get("max_cost") is not None and job.cost >= float(b["max_cost"]):
        return "max_cost"
    if not for_resume and b.get("max_tool_calls") is not None and tool_calls_used(job) >= int(b["max_tool_calls"]):
        return "max_tool_calls"
    if for_resume and b.get("max_resume_attempts") is not None and job.resume_attempts > int(b["max_resume_attempts"]):
        return "max_resume_attempts"
    return None


def usage(job):
    b = job.budgets or {}
    return {
        "deadline_s": {"limit": b.get("deadline_s"), "used": round(time.time() - job.created_at, 3)},
        "max_cost": {"limit": b.get("max_cost"), "used": job.cost},
        "max_tool_calls": {"limit": b.get("max_tool_calls"), "used": tool_calls_used(job)},
        "max_resume_attempts": {"limit": b.get("max_resume_attempts"), "used": job.resume_attempts},
    }


def backoff_remaining(attempt, failed_at, base_s, cap_s=300.0, now=None):
    """Seconds to wait before attempt+1 after a retryable failure (0: go now).

    The first retry is immediate (the common case is a one-off validation error fixed by the
    caller); later ones wait base * 2^(attempt-2), capped.
    """
    if base_s <= 0 or attempt < 2:
        return 0.0
    wait = min(base_s * (2 ** (attempt - 2)), cap_s)
    now = time.time() if now is None else now
    return max(0.0, round(failed_at + wait - now, 3))
