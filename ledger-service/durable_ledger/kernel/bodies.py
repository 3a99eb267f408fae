"""Every request body the ledger takes, declared once (marshmallow): fields, kinds, limits,
defaults, messages. Unknown fields are refused so typos surface as 422.

One declaration drives everything that reads a body: the HTTP routes (web/schemas.py `load`,
and the hot routes of gate/fast_routes.py), LocalLedger (kernel/checks.py `body`) and
/openapi.json (openapi.py, through apispec's marshmallow plugin). `read` is the one reader:

1. a list's item limit on the raw body, before any item is checked (a 2 MiB batch of a
   million items took 23-33 s to refuse when every item was validated and reported first);
2. the fields: 422 ``validation_error`` with ``{"fields": {name: [message]}}``, at most
   ``MAX_FIELD_ERRORS`` listed (the rest counted in ``omitted_errors``);
3. the sized fields (``sized``: field -> Config attribute; ``"*"``: the whole body): at most
   that many bytes of canonical JSON (422, ``max_bytes``).

Value limits match the columns on both backends (PostgreSQL ``integer`` is 32-bit, strings are
``varchar(n)``). What every JSON body must hold (depth, NUL, surrogates, non-finite numbers) is
checked before, while parsing (kernel/limits.py) or walking (kernel/checks.py ``values``).
"""

from marshmallow import RAISE, Schema, ValidationError, fields, validate
from marshmallow.utils import missing

from . import fields as f
from .digest import canonical_json
from .errors import ValidationFailed
from .links import MAX_URL
from .states import ERROR_KINDS

MAX_BATCH_ITEMS = 100  # of each of a batch's lists
MAX_APPROVAL_TTL_S = 90 * 86400
MAX_FIELD_ERRORS = 50  # listed in a 422's details.fields; the rest are counted in omitted_errors


class Strict(Schema):
    class Meta:
        unknown = RAISE

    # field -> Config attribute with its size limit in bytes of canonical JSON ("*": the whole body)
    sized = {}


BudgetsSchema = Strict.from_dict({name: make() for name, make in f.BUDGETS.items()}, name="BudgetsSchema")


def _phases():
    return fields.List(f.text(1, 64), load_default=None, validate=validate.Length(min=1, max=100))


class JobPutSchema(Strict):
    task_version = f.task_version(load_default=1)
    pipeline = f.text(1, 64, load_default="generic")
    phases = _phases()
    budgets = fields.Nested(BudgetsSchema, load_default=dict)
    session_id = f.text(1, 255, load_default=None, allow_none=True)
    policy_hash = f.text(None, 128, load_default=None, allow_none=True)


class VersionSchema(Strict):
    fencing_token = f.fencing_token()
    # The version to start; absent: the next one. The current one again is a no-op.
    task_version = f.integer(1, load_default=None)


class LeaseSchema(Strict):
    owner = f.owner(required=True)
    ttl_s = f.ttl_s()
    takeover = fields.Boolean(load_default=False)


class StartSchema(Strict):
    """`POST /v1/jobs/{id}/start`: JobPut's fields (no session: binding one calls the agent
    service, which cannot sit inside the transaction) and Lease's, plus what a lower version does."""
    task_version = f.task_version(load_default=1)
    pipeline = f.text(1, 64, load_default="generic")
    phases = _phases()
    budgets = fields.Nested(BudgetsSchema, load_default=dict)
    policy_hash = f.text(None, 128, load_default=None, allow_none=True)
    owner = f.owner(required=True)
    ttl_s = f.ttl_s()
    takeover = fields.Boolean(load_default=False)
    # "refuse": a task_version lower than the job's is 409 task_version_lower; "keep": the job goes on
    # at its own version (what Start Job 1 and 1.1 do).
    if_lower = f.one_of(["refuse", "keep"], load_default="refuse")
    # The new holder is working for live_s seconds (then its heartbeats: renew with live_s).
    live_s = f.live_s()
    # "take_over": takeover fences out any holder (as before); "wait": a holder whose heartbeat is
    # recent is not taken over, 409 holder_live, and the caller asks again.
    if_live = f.one_of(["take_over", "wait"], load_default="take_over")


class LeaseRenewSchema(Strict):
    owner = f.owner(required=True)
    fencing_token = f.fencing_token()
    ttl_s = f.ttl_s()
    # A heartbeat: the holder is working for live_s more seconds (0: it is idle now).
    live_s = f.live_s()


class LeaseReleaseSchema(Strict):
    owner = f.owner(required=True)
    fencing_token = f.fencing_token()


class ApprovalPolicySchema(Strict):
    """Who may approve the step and how many (approvals/policy.py): N distinct approvers, among
    the named approvers or groups (both empty: any approver of the tenant)."""
    approvals_needed = f.integer(1, 10, load_default=1)
    approvers = fields.List(f.text(1, 128), load_default=list, validate=validate.Length(max=50))
    groups = fields.List(f.text(1, 128), load_default=list, validate=validate.Length(max=50))
    requester_may_approve = fields.Boolean(load_default=True)


class BeginSchema(Strict):
    """The gate's question. `payload` (digested by the ledger) or `request_hash` is required
    (gate/run.py; the document says it with anyOf)."""
    job_id = f.job_id(required=True)
    action = f.action(required=True)
    payload = fields.Raw(allow_none=True)
    request_hash = f.sha256()
    fencing_token = f.fencing_token()
    # Absent: the ledger derives the key from job, version, action and digest (gate/request.py).
    operation_key = f.operation_key(load_default=None, allow_none=True)
    target = f.target(load_default=None, allow_none=True)
    requires_approval = fields.Boolean(load_default=False)
    # Implies requires_approval; stored at the first begin, another one later is 409.
    approval_policy = fields.Nested(ApprovalPolicySchema, load_default=None, allow_none=True)


class HeartbeatSchema(Strict):
    """A heartbeat carried by a begin or a confirm (the holder's lease renewed with ``live_s``
    after the call's own work, as POST /v1/jobs/{id}/lease/renew would): one round trip where a
    Durable Step node made two. The call's fencing_token is the lease's."""
    owner = f.owner(required=True)
    live_s = f.live_s(required=True, allow_none=False, load_default=missing)


class _ConfirmBody(Strict):
    """A receipt's fields: the confirm route's and each of a batch's confirms."""
    sized = {"receipt": "max_receipt_bytes"}

    fencing_token = f.fencing_token()
    remote_id = f.RemoteId(required=True)
    receipt = f.mapping()
    cost = f.cost()


class BeginCallSchema(BeginSchema):
    """POST /v1/operations/begin: the gate's question, and the holder's first heartbeat."""
    heartbeat = fields.Nested(HeartbeatSchema, load_default=None, allow_none=True)


class ConfirmSchema(_ConfirmBody):
    """POST /v1/operations/{key}/confirm: a receipt, and the holder's handover heartbeat."""
    heartbeat = fields.Nested(HeartbeatSchema, load_default=None, allow_none=True)


class BatchConfirmSchema(_ConfirmBody):
    operation_key = f.operation_key(required=True)


class BatchSchema(Strict):
    confirm = fields.List(fields.Nested(BatchConfirmSchema), load_default=list,
                          validate=validate.Length(max=MAX_BATCH_ITEMS))
    begin = fields.List(fields.Nested(BeginSchema), load_default=list, validate=validate.Length(max=MAX_BATCH_ITEMS))


class FailSchema(Strict):
    sized = {"error": "max_receipt_bytes"}

    fencing_token = f.fencing_token()
    retryable = fields.Boolean(load_default=True)
    error = f.mapping()


class UnknownSchema(Strict):
    sized = {"error": "max_receipt_bytes"}

    fencing_token = f.fencing_token()
    error = f.mapping()


class OutcomeSchema(Strict):
    sized = {"receipt": "max_receipt_bytes", "error": "max_receipt_bytes"}

    fencing_token = f.fencing_token()
    http_status = fields.Integer(load_default=None, allow_none=True, validate=validate.Range(min=100, max=599))
    error_kind = f.one_of(ERROR_KINDS, load_default=None, allow_none=True)
    remote_id = f.RemoteId(load_default=None, allow_none=True)
    receipt = f.mapping()
    error = f.mapping()
    cost = f.cost()


class LookupResultSchema(Strict):
    """What the caller's own lookup found for one attempt of an in-flight operation (gate/lookup.py)."""

    sized = {"receipt": "max_receipt_bytes", "evidence": "max_receipt_bytes"}

    fencing_token = f.fencing_token()
    attempt = f.integer(1, required=True)
    result = f.one_of(["found", "absent", "undecidable"], required=True)
    remote_id = f.RemoteId(load_default=None, allow_none=True)
    receipt = f.mapping()
    evidence = f.mapping()


class ArtifactSchema(Strict):
    role = f.text(1, 255, required=True)
    uri = f.text(1, 2048, required=True)
    sha256 = f.sha256("sha256 must be 64 hex digits", required=True)


class CheckpointSchema(Strict):
    sized = {"*": "max_checkpoint_bytes"}

    fencing_token = f.fencing_token()
    phase = f.text(1, 64, required=True)
    task_version = f.task_version()
    artifacts = fields.List(fields.Nested(ArtifactSchema), load_default=list, validate=validate.Length(max=1000))
    remote = f.mapping()
    next_allowed_actions = fields.List(f.text(1, 255), load_default=list, validate=validate.Length(max=1000))
    approval_status = f.text(None, 64, load_default=None, allow_none=True)


class ApprovalSchema(Strict):
    job_id = f.job_id(required=True)
    task_version = f.task_version(required=True)
    action = f.action(required=True)
    content_digest = f.sha256(required=True)
    target = f.target(required=True)
    expires_at = f.expiry(required=True)
    note = f.text(None, 2000, load_default=None, allow_none=True)


class CancelSchema(Strict):
    reason = f.text(None, 500, load_default=None, allow_none=True)


class ReauthorizeSchema(Strict):
    policy_hash = f.text(None, 128, load_default=None, allow_none=True)
    note = f.text(None, 2000, load_default=None, allow_none=True)


class CurrentArtifactSchema(Strict):
    role = f.text(1, 255, required=True)
    sha256 = f.sha256(required=True)
    uri = f.text(None, 2048, load_default=None, allow_none=True)


class ResumeSchema(Strict):
    owner = f.owner(required=True)
    ttl_s = f.ttl_s()
    takeover = fields.Boolean(load_default=False)
    artifacts = fields.List(fields.Nested(CurrentArtifactSchema), load_default=list, validate=validate.Length(max=1000))
    policy_hash = f.text(None, 128, load_default=None, allow_none=True)


class WaitSchema(Strict):
    fencing_token = f.integer(0, required=True)
    resume_url = f.text(1, MAX_URL, required=True)
    execution_id = fields.String(load_default=None, allow_none=True, validate=validate.Regexp(
        r"^[A-Za-z0-9_.:-]{1,64}$", error="must be 1-64 of A-Z a-z 0-9 _ . : -"))
    workflow_id = fields.String(load_default=None, allow_none=True, validate=validate.Regexp(
        r"^[A-Za-z0-9_.:-]{1,64}$", error="must be 1-64 of A-Z a-z 0-9 _ . : -"))
    # How long the request's console links work (approvals/request_links.py): 60 s .. 30 days.
    link_expires_in_s = f.integer(60, 30 * 86400, load_default=72 * 3600)


class ApproveOperationSchema(Strict):
    content_digest = f.sha256(required=True)
    expires_in_s = fields.Integer(load_default=None, allow_none=True,
                                  validate=validate.Range(min=60, max=MAX_APPROVAL_TTL_S))
    note = f.text(None, 2000, load_default=None, allow_none=True)


class DenyOperationSchema(Strict):
    content_digest = f.sha256(required=True)
    reason = f.text(1, 2000, required=True)


class ResolveSchema(Strict):
    decision = f.one_of(["confirm", "fail", "abandon"], required=True)
    remote_id = fields.Raw(load_default=None, allow_none=True)
    note = f.text(None, 2000, load_default=None, allow_none=True)
    expected_state = fields.String(load_default=None, allow_none=True)


class BindSchema(Strict):
    session_id = f.text(1, 255, required=True)


class ExpectedArtifactSchema(Strict):
    role = f.text(1, 255, required=True)
    sha256 = f.sha256("sha256 must be 64 hex digits", required=True)
    uri = f.text(1, 2048)


class SyncSchema(Strict):
    fencing_token = f.integer(load_default=None, allow_none=True)
    answer_actions = fields.Boolean(load_default=False)
    rebuild_stream = fields.Boolean(load_default=False)
    expected_artifacts = fields.List(fields.Nested(ExpectedArtifactSchema), load_default=list,
                                     validate=validate.Length(max=1000))


class FollowUpSchema(Strict):
    message = f.text(1, 20000, required=True)
    fencing_token = f.fencing_token()
    idempotency_key = f.identifier(200, load_default=None, allow_none=True)


def declared():
    """Every body: component name (as /openapi.json names it) -> schema class."""
    return {name.removesuffix("Schema"): cls for name, cls in globals().items()
            if name.endswith("Schema") and isinstance(cls, type) and issubclass(cls, Strict) and cls is not Strict}


_instances = {}


def instance(schema_cls):
    """Schemas are stateless once built; building one deep-copies every field (about 0.1 ms),
    so each class is built once per process."""
    schema = _instances.get(schema_cls)
    if schema is None:
        schema = _instances[schema_cls] = schema_cls()
        # The fields in the order `_plain` reads them; None when a hook would make load differ.
        schema.plain_fields = None if any(schema._hooks.values()) else [(fd.data_key or n, n, fd) for n, fd in schema.load_fields.items()]
        schema.plain_names = frozenset(k for k, _, _ in schema.plain_fields or ())
        # The top-level lists with an item limit, and those whose items have sized fields.
        schema.item_limits = [(fd.data_key or n, n, v.max) for n, fd in schema.fields.items()
                              if isinstance(fd, fields.List) for v in fd.validators
                              if isinstance(v, validate.Length) and v.max is not None]
        schema.sized_items = [(n, fd.inner.nested) for n, fd in schema.fields.items()
                              if isinstance(getattr(fd, "inner", None), fields.Nested) and fd.inner.nested.sized]
    return schema


def read(schema_cls, data, limits):
    """``data`` (the parsed JSON object) as ``schema_cls`` loads it, or its refusal.
    ``limits``: an object with the ``sized`` attributes (the Config)."""
    schema = instance(schema_cls)
    check_counts(schema, data)
    out = _plain(schema, data)
    if out is None:
        try:
            out = schema.load(data)
        except ValidationError as exc:
            raise validation_failed(exc.messages) from None
    check_sizes(schema_cls, out, limits)
    return out


def _plain(schema, data):
    """The good body's load without Schema.load's bookkeeping (a third of a hot request's
    validation cost): each field's own deserialize, as load calls it. Anything it is not sure of
    (an unknown field, a refused value) gives None, and `read` lets Schema.load answer."""
    if schema.plain_fields is None or not data.keys() <= schema.plain_names:
        return None
    out = {}
    try:
        for key, name, field in schema.plain_fields:
            value = field.deserialize(data.get(key, missing), key, data)
            if value is not missing:
                out[name] = value
    except ValidationError:
        return None
    return out


def check_counts(schema, data):
    """Item-count limits of top-level lists, on the raw body, before any item is validated."""
    for key, name, most in schema.item_limits:
        value = data.get(key)
        if isinstance(value, list) and len(value) > most:
            raise ValidationFailed(f"{name} has {len(value)} items; at most {most} are taken",
                                   {"fields": {name: [f"at most {most} items"]}, "max_items": most})


def check_sizes(schema_cls, body, limits):
    for name, attr in schema_cls.sized.items():
        sized("body" if name == "*" else name, body if name == "*" else body.get(name), getattr(limits, attr))
    for name, nested in instance(schema_cls).sized_items:  # a batch's confirms: each item's receipt
        for item in body.get(name) or ():
            check_sizes(nested, item, limits)


def sized(field, value, limit):
    """A receipt, an error or a checkpoint: at most ``limit`` bytes of canonical JSON."""
    if value is not None and len(canonical_json(value)) > limit:
        raise ValidationFailed(f"{field} is larger than {limit} bytes of JSON",
                               {"fields": {field: [f"at most {limit} bytes of JSON"]}, "max_bytes": limit})


def cap_messages(messages, limit=MAX_FIELD_ERRORS):
    """marshmallow's nested messages, keeping the first ``limit`` fields that failed (in the
    body's order) and counting the rest: an error answer stays small whatever the body."""
    kept, omitted = 0, 0

    def walk(node):
        nonlocal kept, omitted
        out = {}
        for key, value in node.items():
            if isinstance(value, dict):
                sub = walk(value)
                if sub:
                    out[key] = sub
            elif kept < limit:
                kept += 1
                out[key] = value
            else:
                omitted += 1
        return out

    return (walk(messages) if isinstance(messages, dict) else messages), omitted


def validation_failed(messages):
    """The 422 for marshmallow's ``messages``, at most MAX_FIELD_ERRORS of them listed."""
    listed, omitted = cap_messages(messages)
    return ValidationFailed("request validation failed",
                            {"fields": listed, **({"omitted_errors": omitted} if omitted else {})})
