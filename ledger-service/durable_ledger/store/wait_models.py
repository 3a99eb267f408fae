"""Tables of executions waiting for an approval decision; the schema migrations create WAIT_MODELS.

See approvals/waits.py for the protocol. Rows belong to the operation (and its job) with
ON DELETE CASCADE, so pruning a job takes its waits along.
"""

from peewee import AutoField, CharField, DoubleField, ForeignKeyField, IntegerField, TextField

from .models import BaseModel, Job, JSONText, Operation


class ApprovalWait(BaseModel):
    """An n8n execution parked in a Wait node until the operation is approved or denied.

    ``open_key`` is the sha256 of the resume URL while the wait is unanswered and NULL once its
    delivery reached n8n: the unique index makes a repeated registration of the same waiting
    execution return the same row (claim by INSERT), while an execution that comes back to wait
    again after a resume (same URL: n8n has one resume URL per execution) gets a new one.
    """

    id = AutoField()
    tenant = CharField(max_length=128)
    operation = ForeignKeyField(Operation, on_delete="CASCADE", index=True)
    job = ForeignKeyField(Job, on_delete="CASCADE", index=True)
    operation_key = CharField(max_length=512)
    resume_url = TextField()  # a secret (n8n's ?signature= token): never logged or returned whole
    open_key = CharField(max_length=64, null=True)
    execution_id = CharField(max_length=64, null=True)
    workflow_id = CharField(max_length=64, null=True)
    fencing_token = IntegerField()
    registered_by = CharField(max_length=255)
    registered_at = DoubleField()

    class Meta:
        indexes = ((("tenant", "operation_key", "open_key"), True),)


class ApprovalDelivery(BaseModel):
    """The one call of a wait's resume URL for the decision that answered it.

    ``state``: pending -> delivered | failed. A deliverer owns a pending row while
    ``claimed_until`` lies in the future (taken by a conditional UPDATE); ``attempts`` counts the
    calls made, ``next_attempt_at`` is when the next one is due (exponential backoff).
    """

    id = AutoField()
    wait = ForeignKeyField(ApprovalWait, unique=True, on_delete="CASCADE")
    tenant = CharField(max_length=128)
    operation_key = CharField(max_length=512)
    decision = CharField(max_length=16)  # approved | denied
    reason = TextField(null=True)
    state = CharField(max_length=16, default="pending")
    attempts = IntegerField(default=0)
    next_attempt_at = DoubleField()
    claimed_until = DoubleField(null=True)
    last_status = IntegerField(null=True)
    last_error = JSONText(null=True)
    created_at = DoubleField()
    delivered_at = DoubleField(null=True)

    class Meta:
        indexes = ((("state", "next_attempt_at"), False),)


WAIT_MODELS = [ApprovalWait, ApprovalDelivery]
