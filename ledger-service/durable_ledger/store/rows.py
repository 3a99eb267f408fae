"""What the gate's statements take and give: column lists, the JSON codec, row -> model.

Shared by both backends; the statements themselves are in `sqlite.py` and `postgres.py`.
"""

from dataclasses import dataclass
from typing import Any, Callable

from .models import Job, JSONText, Operation

json_codec = JSONText()
JOB_COLS = [f.column_name for f in Job._meta.sorted_fields]
OP_COLS = [f.column_name for f in Operation._meta.sorted_fields]
_JOB_FIELDS = [Job._meta.columns[c] for c in JOB_COLS]
_OP_FIELDS = [Operation._meta.columns[c] for c in OP_COLS]
INSERT_COLS = ["tenant", "operation_key", "job_id", "task_version", "action", "request_hash", "state", "attempt",
               "max_attempts", "fencing_token", "target", "requires_approval", "request_summary",
               "reconcile_attempts", "created_at", "updated_at", "dispatched_by", "field_digests", "approval_policy"]
EVENT_COLS = "operation_id, job_id, from_state, to_state, actor, fencing_token, detail, created_at"


class LeaseView:
    """The lease as the gate needs it: its current token."""

    __slots__ = ("fencing_token",)

    def __init__(self, token):
        self.fencing_token = token


@dataclass(frozen=True)
class NewOp:
    """An operation row to insert: as SENT (a claim) or PREPARED (waiting for an approval)."""

    tenant: str
    key: str
    job_pk: int
    task_version: int
    action: str
    digest: str
    token: int
    target: str | None
    requires_approval: bool
    max_attempts: int
    actor: str
    summary: dict | None
    now: float
    dispatched_by: str | None = None  # the n8n execution of the claim (a PREPARED row has none)
    fields: dict | None = None  # per-top-level-field digests (gate/mismatch.py)
    policy: dict | None = None  # the approval policy (approvals/policy.py), stored with the row

    def values(self, state):
        return [self.tenant, self.key, self.job_pk, self.task_version, self.action, self.digest, state, 1,
                self.max_attempts, self.token, self.target, bool(self.requires_approval),
                json_codec.db_value(self.summary), 0, self.now, self.now,
                self.dispatched_by if state == "SENT" else None, json_codec.db_value(self.fields),
                json_codec.db_value(self.policy)]

    def model(self, op_id, state):
        return _built(Operation, dict(
            id=op_id, tenant=self.tenant, operation_key=self.key, job=self.job_pk, task_version=self.task_version,
            action=self.action, request_hash=self.digest, state=state, attempt=1, max_attempts=self.max_attempts,
            retryable=None, fencing_token=self.token, target=self.target, requires_approval=bool(self.requires_approval),
            remote_id=None, receipt=None, last_error=None, request_summary=self.summary, reconcile_attempts=0,
            reconciling_until=None, evidence=None, created_at=self.now, updated_at=self.now,
            dispatched_by=self.dispatched_by if state == "SENT" else None, field_digests=self.fields,
            approval_policy=self.policy))


@dataclass(frozen=True)
class ClaimTemplate:
    """A claim of a new operation before the job row is read (its key, job and version come
    from that row): what the one-statement begin inserts when nothing stands in the way."""

    action: str
    digest: str
    token: int | None
    target: str | None
    actor: str
    summary: dict | None
    detail: dict | None
    default_max_attempts: int
    now: float
    fields: dict | None = None

    def new_op(self, key, job, max_attempts):
        return NewOp(job.tenant, key, job.id, job.task_version, self.action, self.digest, self.token, self.target,
                     False, max_attempts, self.actor, self.summary, self.now, dispatcher(self.detail), self.fields)


@dataclass(frozen=True)
class JobGuard:
    """The job row as a claim reads it under the row's lock, inside its own transaction."""

    status: str
    halt_reason: str | None
    budgets: dict | None
    cost: float
    created_at: float
    dispatches: Callable[[], int]  # counts SENT moves of the job, in the same transaction


# A claim asks the caller's rule whether the guarded job may dispatch: a refusal or None.
MayDispatch = Callable[[JobGuard], Any]


def dispatcher(detail):
    """The n8n execution an event's detail was stamped with (kernel/n8n_context.py `stamp`), or None:
    the claims store it as the attempt's ``dispatched_by``, the same value its SENT event names."""
    n8n = (detail or {}).get("n8n") if isinstance(detail, dict) else None
    return (n8n or {}).get("execution_id")


def _built(model, data):
    """A model instance holding ``data`` (every field, by name), as ``model(**data)`` builds it but
    without a descriptor call per field: rows are built on every gate call."""
    obj = model.__new__(model)
    obj.__data__, obj._dirty, obj.__rel__ = data, set(data), {}
    return obj


def job_model(values):
    return _built(Job, {f.name: f.python_value(v) for f, v in zip(_JOB_FIELDS, values)})


def op_model(values):
    return _built(Operation, {f.name: f.python_value(v) for f, v in zip(_OP_FIELDS, values)})
