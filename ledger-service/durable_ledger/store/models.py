"""Persistence schema (peewee). Times are epoch seconds (double precision: peewee's FloatField
is a 4-byte REAL on PostgreSQL and would round them to minutes) so that comparisons in SQL
behave the same on SQLite and PostgreSQL; the API renders them as ISO 8601.
"""

import json

from peewee import (
    AutoField,
    BooleanField,
    CharField,
    DoubleField,
    ForeignKeyField,
    IntegerField,
    Model,
    TextField,
)

from .db import db


class JSONText(TextField):
    """JSON stored as text: portable across SQLite and PostgreSQL."""

    def db_value(self, value):
        if value is None:
            return None
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)

    def python_value(self, value):
        if value is None:
            return None
        return json.loads(value)


class BaseModel(Model):
    class Meta:
        database = db
        legacy_table_names = False


class ApiToken(BaseModel):
    id = AutoField()
    tenant = CharField(max_length=128)
    role = CharField(max_length=16)
    token_hash = CharField(max_length=64, unique=True)
    name = CharField(max_length=128, null=True)
    sites = TextField(null=True)  # comma-separated site profiles; NULL = every site
    created_at = DoubleField()
    revoked_at = DoubleField(null=True)
    groups = TextField(null=True)  # comma-separated approver groups (m0009); NULL = none


class Job(BaseModel):
    id = AutoField()
    tenant = CharField(max_length=128)
    job_id = CharField(max_length=255)
    session_id = CharField(max_length=255, null=True, unique=True)
    task_version = IntegerField(default=1)
    pipeline = CharField(max_length=64, default="generic")
    phases = JSONText(null=True)
    phase = CharField(max_length=64, null=True)
    status = CharField(max_length=16, default="active")  # active | halted | cancelled | completed
    halt_reason = CharField(max_length=64, null=True)
    checkpoint = JSONText(null=True)
    budgets = JSONText(null=True)
    cost = DoubleField(default=0.0)
    resume_attempts = IntegerField(default=0)
    policy_hash = CharField(max_length=128, null=True)
    created_at = DoubleField()
    updated_at = DoubleField()

    class Meta:
        # No second index starts with `tenant`: see m0003 (the gate's lookup by key must have one
        # candidate index, or a plan made while the table was small can keep the wrong one).
        indexes = ((("tenant", "job_id"), True), (("status", "tenant", "updated_at"), False))


class Lease(BaseModel):
    """One row per job. ``fencing_token`` only ever grows: it is the job's high-water mark."""

    id = AutoField()
    job = ForeignKeyField(Job, unique=True, on_delete="CASCADE")
    owner = CharField(max_length=255)
    fencing_token = IntegerField()
    expires_at = DoubleField()
    acquired_at = DoubleField()
    # The holder is working until then (heartbeats; jobs/leases.py). None: it never said.
    live_until = DoubleField(null=True)


class Operation(BaseModel):
    id = AutoField()
    tenant = CharField(max_length=128)
    operation_key = CharField(max_length=512)
    job = ForeignKeyField(Job, on_delete="CASCADE", index=False)  # (job, state) below serves it (m0007)
    task_version = IntegerField()
    action = CharField(max_length=255)
    request_hash = CharField(max_length=64)
    state = CharField(max_length=16)
    attempt = IntegerField(default=1)
    max_attempts = IntegerField(default=3)
    retryable = BooleanField(null=True)
    fencing_token = IntegerField()
    target = CharField(max_length=255, null=True)
    requires_approval = BooleanField(default=False)
    remote_id = CharField(max_length=255, null=True)
    receipt = JSONText(null=True)
    last_error = JSONText(null=True)
    request_summary = JSONText(null=True)
    reconcile_attempts = IntegerField(default=0)
    reconciling_until = DoubleField(null=True)  # a reconciler run's claim (one at a time per operation)
    evidence = JSONText(null=True)  # the last reconciliation's evidence and candidate remote objects
    # The n8n execution that moved the current attempt into SENT (None: a caller without one).
    # A confirm or outcome from another execution does not settle the attempt (reconciliation/attempts.py).
    dispatched_by = CharField(max_length=64, null=True)
    field_digests = JSONText(null=True)  # {top-level field: short digest} of the first payload (m0006)
    created_at = DoubleField()
    updated_at = DoubleField()
    # Who may approve and how many (approvals/policy.py), fixed at the first begin (m0009); None:
    # one approval by any approver of the tenant.
    approval_policy = JSONText(null=True)

    class Meta:
        indexes = (
            (("tenant", "operation_key"), True),  # the gate's lookup: the only index on `tenant` first
            (("job", "state"), False),
            (("state", "tenant", "updated_at"), False),  # review queue, reports (m0003)
            (("state", "updated_at"), False),  # the sweeper scans across tenants
        )


class OperationEvent(BaseModel):
    """Append-only: every transition, who made it, with which token."""

    id = AutoField()
    operation = ForeignKeyField(Operation, on_delete="CASCADE", index=True)
    job = ForeignKeyField(Job, on_delete="CASCADE", index=False)  # (job, to_state) below serves it (m0007)
    from_state = CharField(max_length=16, null=True)
    to_state = CharField(max_length=16)
    actor = CharField(max_length=255)
    fencing_token = IntegerField(null=True)
    detail = JSONText(null=True)
    created_at = DoubleField()

    class Meta:
        indexes = ((("job", "to_state"), False),)  # dispatch counts for the tool-call budget


class Checkpoint(BaseModel):
    id = AutoField()
    job = ForeignKeyField(Job, on_delete="CASCADE")
    seq = IntegerField()
    phase = CharField(max_length=64)
    task_version = IntegerField()
    body = JSONText()
    fencing_token = IntegerField()
    actor = CharField(max_length=255)
    created_at = DoubleField()

    class Meta:
        indexes = ((("job", "seq"), True),)


class AuditLog(BaseModel):
    """Append-only record of human and policy decisions (job-level, token-level)."""

    id = AutoField()
    tenant = CharField(max_length=128, index=True)
    job = ForeignKeyField(Job, null=True, on_delete="CASCADE", index=True)
    actor = CharField(max_length=255)
    action = CharField(max_length=64)
    detail = JSONText(null=True)
    created_at = DoubleField()


class Approval(BaseModel):
    """An approver's yes, bound to exactly one version, action, content digest and target."""

    id = AutoField()
    tenant = CharField(max_length=128)
    job = ForeignKeyField(Job, on_delete="CASCADE")
    task_version = IntegerField()
    action = CharField(max_length=255)
    content_digest = CharField(max_length=64)
    target = CharField(max_length=255)
    policy_hash = CharField(max_length=128, null=True)
    expires_at = DoubleField()
    approved_by = CharField(max_length=255)
    note = TextField(null=True)
    created_at = DoubleField()
    revoked_at = DoubleField(null=True)
    revoked_by = CharField(max_length=255, null=True)
    used_at = DoubleField(null=True)
    # The approver as a policy sees them (m0009): the token's name and groups when it decided,
    # and the door it came through (console | link | api). None on older rows: the name is
    # approved_by's, without groups.
    approver_name = CharField(max_length=128, null=True)
    approver_groups = TextField(null=True)
    door = CharField(max_length=16, null=True)

    class Meta:
        indexes = ((("job", "task_version", "action"), False),)


class ApprovalDenial(BaseModel):
    """An approver's no for one operation's request digest, with the reason; the gate answers
    halt/approval_denied while it stands. A later approval of the same digest lifts it."""

    id = AutoField()
    tenant = CharField(max_length=128)
    operation = ForeignKeyField(Operation, on_delete="CASCADE")
    job = ForeignKeyField(Job, on_delete="CASCADE")
    content_digest = CharField(max_length=64)
    reason = TextField()
    denied_by = CharField(max_length=255)
    created_at = DoubleField()
    lifted_at = DoubleField(null=True)
    lifted_by = CharField(max_length=255, null=True)
    door = CharField(max_length=16, null=True)  # console | link | api (m0009)

    class Meta:
        indexes = ((("operation", "content_digest"), False),)


class Setting(BaseModel):
    """Service-wide values shared by every worker (e.g. the review page's session key)."""

    key = CharField(max_length=64, primary_key=True)
    value = TextField()


ALL_MODELS = [ApiToken, Job, Lease, Operation, OperationEvent, Checkpoint, AuditLog, Approval, Setting, ApprovalDenial]

