"""Which dispatch budget of a job is used up: one pure rule for the gate's decision table
(gate/decide.py, also re-checked under the job row's lock) and for resumes and reports (jobs/budgets.py)."""


def exhausted_budget(budgets, cost, created_at, dispatches, now):
    """The name of the first used-up dispatch budget, or None. ``dispatches`` may be a number or
    a function that counts (only called when a tool-call budget is set)."""
    b = budgets or {}
    if b.get("deadline_s") is not None and now - created_at >= float(b["deadline_s"]):
        return "deadline_s"
    if b.get("max_cost") is not None and (cost or 0) >= float(b["max_cost"]):
        return "max_cost"
    if b.get("max_tool_calls") is not None:
        used = dispatches() if callable(dispatches) else dispatches
        if used >= int(b["max_tool_calls"]):
            return "max_tool_calls"
    return None

