"""Tables of the agents module; the schema migrations create everything listed in AGENT_MODELS.

Every row that belongs to a job references it with ON DELETE CASCADE, so deleting a job (or a
test emptying the core tables) takes its session state along.
"""

from peewee import AutoField, BooleanField, CharField, DoubleField, ForeignKeyField, IntegerField, TextField

from .models import BaseModel, Job, JSONText


class SessionBinding(BaseModel):
    """One Agents API session per job, and one job per session (both unique)."""

    id = AutoField()
    tenant = CharField(max_length=128)
    job = ForeignKeyField(Job, unique=True, on_delete="CASCADE")
    session_id = CharField(max_length=255, unique=True)
    config_hash = CharField(max_length=64, null=True)  # sha256 of the agent configuration at bind time
    config_changed = BooleanField(default=False)
    status = CharField(max_length=32, null=True)  # idle | in_progress | requires_action | failed
    environment = JSONText(null=True)  # {"type", "id", "state"}: environment state, never a business action
    required_actions = JSONText(null=True)
    item_count = IntegerField(default=0)
    stale = BooleanField(default=False)  # the live view lost events; a rebuild is due
    last_synced_at = DoubleField(null=True)
    created_at = DoubleField()
    updated_at = DoubleField()


class SessionItem(BaseModel):
    """One saved item of a session, by item id. A terminal item is never overwritten."""

    id = AutoField()
    binding = ForeignKeyField(SessionBinding, on_delete="CASCADE")
    item_id = CharField(max_length=255)
    item_type = CharField(max_length=64)
    status = CharField(max_length=32, null=True)
    terminal = BooleanField(default=False)
    turn_id = CharField(max_length=255, null=True)
    call_id = CharField(max_length=255, null=True)
    body = JSONText()
    updated_at = DoubleField()

    class Meta:
        indexes = ((("binding", "item_id"), True),)


class SessionTurn(BaseModel):
    id = AutoField()
    binding = ForeignKeyField(SessionBinding, on_delete="CASCADE")
    turn_id = CharField(max_length=255)
    status = CharField(max_length=32)
    error = JSONText(null=True)
    created_at = DoubleField(null=True)
    completed_at = DoubleField(null=True)
    updated_at = DoubleField()

    class Meta:
        indexes = ((("binding", "turn_id"), True),)


class ActionDelivery(BaseModel):
    """Outbox of function results: executed once (through the gate), delivered until accepted."""

    id = AutoField()
    binding = ForeignKeyField(SessionBinding, on_delete="CASCADE")
    call_id = CharField(max_length=255)
    turn_id = CharField(max_length=255)
    operation_key = CharField(max_length=512)
    state = CharField(max_length=16)  # pending | delivered
    attempts = IntegerField(default=0)
    last_error = TextField(null=True)
    created_at = DoubleField()
    updated_at = DoubleField()

    class Meta:
        indexes = ((("binding", "call_id"), True),)


class FollowUp(BaseModel):
    """A follow-up message, claimed by INSERT on its idempotency key before it is sent."""

    id = AutoField()
    job = ForeignKeyField(Job, on_delete="CASCADE")
    idempotency_key = CharField(max_length=255)
    request_hash = CharField(max_length=64)
    state = CharField(max_length=16)  # sending | sent
    packet = JSONText()
    attempts = IntegerField(default=0)
    created_at = DoubleField()
    updated_at = DoubleField()

    class Meta:
        indexes = ((("job", "idempotency_key"), True),)


class WebhookInbox(BaseModel):
    """Verified webhook deliveries; the webhook id is unique so a redelivery is a no-op."""

    id = AutoField()
    webhook_id = CharField(max_length=255, unique=True)
    tenant = CharField(max_length=128)
    job = ForeignKeyField(Job, on_delete="CASCADE")
    session_id = CharField(max_length=255, null=True)
    event_type = CharField(max_length=128)
    payload = JSONText()
    state = CharField(max_length=16, default="pending")  # pending | processing | done
    claimed_by = CharField(max_length=255, null=True)
    claimed_at = DoubleField(null=True)
    attempts = IntegerField(default=0)
    result = JSONText(null=True)
    received_at = DoubleField()
    processed_at = DoubleField(null=True)

    class Meta:
        indexes = ((("state", "received_at"), False),)


class Artifact(BaseModel):
    """Content-addressed blobs: the file lives in the artifact directory under its sha256."""

    id = AutoField()
    tenant = CharField(max_length=128)
    sha256 = CharField(max_length=64)
    size = IntegerField()
    created_at = DoubleField()

    class Meta:
        indexes = ((("tenant", "sha256"), True),)


class EnvSnapshot(BaseModel):
    id = AutoField()
    tenant = CharField(max_length=128)
    job = ForeignKeyField(Job, on_delete="CASCADE")
    manifest_sha256 = CharField(max_length=64)
    manifest = JSONText()
    created_at = DoubleField()


AGENT_MODELS = [SessionBinding, SessionItem, SessionTurn, ActionDelivery, FollowUp, WebhookInbox, Artifact,
                EnvSnapshot]
