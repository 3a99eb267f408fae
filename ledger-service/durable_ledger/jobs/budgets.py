"""Per-job budgets: wall-clock deadline, cost, tool calls, resume attempts.

Which budget stops a dispatch is decided by kernel/budgets.py (`exhausted_budget`), once, for the
gate's read and for the claim's re-check under the job row's lock; this module adds what
resumes and reports need.
"""

import time

from .. import store
from ..kernel.budgets import exhausted_budget
from ..kernel.checks import stored_budgets
from ..kernel.fields import BUDGETS


def tool_calls_used(job):
    """Dispatches so far (every move into SENT), from the event log (`store.count_dispatches`)."""
    return store.count_dispatches(job.id)


def exhausted(job, now=None, for_resume=False):
    """The name of the first exhausted budget, or None. ``for_resume``: the budgets that stop a
    resume (deadline, cost, resume attempts) instead of those that stop a dispatch."""
    now = time.time() if now is None else now
    b = stored_budgets(job, tuple(BUDGETS))  # a budget stored as "abc": 409 stored_value_invalid
    if not for_resume:
        return exhausted_budget(b, job.cost, job.created_at, lambda: tool_calls_used(job), now)
    budget = exhausted_budget({k: b.get(k) for k in ("deadline_s", "max_cost")}, job.cost, job.created_at, 0, now)
    if budget is None and b.get("max_resume_attempts") is not None \
            and job.resume_attempts > b["max_resume_attempts"]:
        return "max_resume_attempts"
    return budget


def usage(job):
    b = job.budgets or {}
    return {
        "deadline_s": {"limit": b.get("deadline_s"), "used": round(time.time() - job.created_at, 3)},
        "max_cost": {"limit": b.get("max_cost"), "used": job.cost},
        "max_tool_calls": {"limit": b.get("max_tool_calls"), "used": tool_calls_used(job)},
        "max_resume_attempts": {"limit": b.get("max_resume_attempts"), "used": job.resume_attempts},
    }
