"""Which n8n execution made the current call: stamped into every operation event it writes.

The Durable Step node sends ``X-N8N-Execution-Id`` and ``X-N8N-Workflow-Id`` on each ledger
call; the API's before_request puts them here (a context variable, so core code never imports
Flask) and the event writers add ``{"n8n": {"execution_id", "workflow_id"}}`` to the event's
detail. The job timeline links each step to the execution that did it. One dict per request,
no query: the gate's hot path pays nothing measurable for it.

Set on every request (None when the headers are absent): the server's threads serve request after
request, and a value left from the previous one would be stamped on the wrong events.
"""

import re
from contextvars import ContextVar

_current = ContextVar("durable_n8n_execution", default=None)
# n8n execution ids are integers, workflow ids short nanoid strings; anything else is not kept.
_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")


def clean_id(value):
    """``value`` if it looks like an n8n id, else None."""
    return value if isinstance(value, str) and _ID.match(value) else None



def set_execution(execution_id, workflow_id):
    """Remember the caller's n8n execution for this request (invalid ids are dropped, not refused:
    this is provenance for people, never a reason to fail a side effect)."""
    execution_id, workflow_id = clean_id(execution_id), clean_id(workflow_id)
    _current.set({"execution_id": execution_id, "workflow_id": workflow_id}
                 if execution_id or workflow_id else None)


def current():
    return _current.get()


def stamp(detail):
    """``detail`` with the caller's n8n execution added (unchanged when there is none)."""
    n8n = _current.get()
    if n8n is None:
        return detail
    return {**(detail or {}), "n8n": n8n}
