"""Request validation (marshmallow). Unknown fields are refused so typos surface as 422.

Value limits match the columns on both backends (PostgreSQL ``integer`` is 32-bit, strings are
``varchar(n)``); the limits every body shares (depth, NUL, surrogates, non-finite numbers) are
applied while parsing, in ``limits.parse_json``. The fields LocalLedger takes too (ids, keys,
actions, targets, owners, tokens, task versions, budgets, ttl, cost, remote ids, receipt and
error sizes) are checked by durable_ledger.kernel.fields and .checks, the modules both doors call: here each is
a `Shared` field, whose marshmallow type and validators only describe it in /openapi.json.
"""

import time
from datetime import datetime, timezone

from flask import current_app
from marshmallow import RAISE, Schema, ValidationError, fields, validate

from ..kernel import checks, limits
from ..kernel import fields as rules  # marshmallow's `fields` is this module's other name
from ..kernel.errors import MalformedJson
from . import refusals

_key = validate.Length(min=1, max=255)
MAX_APPROVAL_HORIZON_S = rules.MAX_APPROVAL_HORIZON_S


def _int32(min=limits.INT32_MIN, max=limits.INT32_MAX):
    return validate.Range(min=min, max=max)


def _identifier(max_len=255, slashes=True):
    def check(value):
        problem = limits.id_problem(value, max_len, slashes)
        if problem:
            raise ValidationError(problem)
    return check




def _expiry(value):
    try:
        ts = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except (AttributeError, ValueError) as exc:
        raise ValidationError("must be an ISO 8601 timestamp") from exc
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=timezone.utc)
    # A date near year 9999 in a far-west offset is year 10000 in UTC: the row would be stored
    # but could never be rendered back (datetime.fromtimestamp overflows), so cap well before.
    if ts.timestamp() > time.time() + MAX_APPROVAL_HORIZON_S:
        raise ValidationError("must be at most 100 years from now")


class _Shared:
    """A field checked by durable_ledger.kernel.fields (``check``: value -> normalised value)."""

    def __init__(self, check, *args, **kwargs):
        self.check = check
        super().__init__(*args, **kwargs)

    def _deserialize(self, value, attr, data, **kwargs):
        try:
            return self.check(value)
        except rules.Problem as exc:
            raise ValidationError(exc.messages) from None


class SharedInt(_Shared, fields.Integer):
    pass


class SharedFloat(_Shared, fields.Float):
    pass


class SharedStr(_Shared, fields.String):
    pass


class SharedBool(_Shared, fields.Boolean):
    pass


class SharedDict(_Shared, fields.Dict):
    pass


class SharedNested(_Shared, fields.Nested):
    pass


class SharedList(_Shared, fields.List):
    pass


class RemoteId(_Shared, fields.Raw):
    """The remote object's id: a string or an integer that fits the 255-character column."""

    def __init__(self, **kwargs):
        super().__init__(rules.remote_id, **kwargs)


def _number(check, **kwargs):
    """A Shared number field; its Range (from the check's own bounds) is for the document."""
    cls = SharedInt if check.kind is int else SharedFloat
    return cls(check, validate=validate.Range(min=check.lo, max=check.hi), **kwargs)


def _token():
    return _number(rules.FENCING_TOKEN, required=True, strict=True)


def _bool(**kwargs):
    return SharedBool(rules.boolean, **kwargs)


def _dict(**kwargs):
    return SharedDict(rules.mapping, **kwargs)


class Strict(Schema):
    class Meta:
        unknown = RAISE

    # field -> Config attribute with its size limit in bytes of canonical JSON ("*": the whole body)
    sized = {}


# For the document: the budgets are read by rules.budgets (JobPutSchema.budgets).
BudgetsSchema = Strict.from_dict({name: _number(check) for name, check in rules.BUDGETS.items()},
                                 name="BudgetsSchema")


class JobPutSchema(Strict):
    task_version = _number(rules.TASK_VERSION, load_default=1)
    pipeline = SharedStr(rules.PIPELINE, load_default="generic", validate=validate.Length(min=1, max=64))
    phases = SharedList(rules.phases, fields.String(validate=validate.Length(min=1, max=64)), load_default=None,
                        validate=validate.Length(min=1, max=100))
    budgets = SharedNested(rules.budgets, BudgetsSchema, load_default=dict)
    session_id = SharedStr(rules.SESSION_ID, load_default=None, allow_none=True, validate=_key)
    policy_hash = SharedStr(rules.POLICY_HASH, load_default=None, allow_none=True, validate=validate.Length(max=128))


class TokenSchema(Strict):
    fencing_token = _token()


class VersionSchema(Strict):
    fencing_token = fields.Integer(required=True, strict=True, validate=_int32())
    # The version to start; absent: the next one. The current one again is a no-op.
    task_version = fields.Integer(load_default=None, strict=True, validate=_int32(min=1))


class LeaseSchema(Strict):
    owner = SharedStr(rules.OWNER, required=True, validate=_key)
    ttl_s = _number(rules.TTL_S, load_default=None)
    takeover = _bool(load_default=False)


class StartSchema(Strict):
    """`POST /v1/jobs/{id}/start`: JobPut's fields (no session: binding one calls the agent
    service, which cannot sit inside the transaction) and Lease's, plus what a lower version does."""
    task_version = _number(rules.TASK_VERSION, load_default=1)
    pipeline = SharedStr(rules.PIPELINE, load_default="generic", validate=validate.Length(min=1, max=64))
    phases = SharedList(rules.phases, fields.String(validate=validate.Length(min=1, max=64)), load_default=None,
                        validate=validate.Length(min=1, max=100))
    budgets = SharedNested(rules.budgets, BudgetsSchema, load_default=dict)
    policy_hash = SharedStr(rules.POLICY_HASH, load_default=None, allow_none=True, validate=validate.Length(max=128))
    owner = SharedStr(rules.OWNER, required=True, validate=_key)
    ttl_s = _number(rules.TTL_S, load_default=None)
    takeover = _bool(load_default=False)
    # "refuse": a task_version lower than the job's is 409 task_version_lower; "keep": the job goes on
    # at its own version (what Start Job 1 and 1.1 do).
    if_lower = fields.String(load_default="refuse", validate=validate.OneOf(["refuse", "keep"]))
    # The new holder is working for live_s seconds (then its heartbeats: renew with live_s).
    live_s = _number(rules.LIVE_S, load_default=None, allow_none=True)
    # "take_over": takeover fences out any holder (as before); "wait": a holder whose heartbeat is
    # recent is not taken over, 409 holder_live, and the caller asks again.
    if_live = fields.String(load_default="take_over", validate=validate.OneOf(["take_over", "wait"]))


class LeaseRenewSchema(Strict):
    owner = SharedStr(rules.OWNER, required=True, validate=_key)
    fencing_token = _token()
    ttl_s = _number(rules.TTL_S, load_default=None)
    # A heartbeat: the holder is working for live_s more seconds (0: it is idle now).
    live_s = _number(rules.LIVE_S, load_default=None, allow_none=True)


class LeaseReleaseSchema(Strict):
    owner = SharedStr(rules.OWNER, required=True, validate=_key)
    fencing_token = _token()


class BeginSchema(Strict):
    job_id = SharedStr(rules.JOB_ID, required=True)
    action = SharedStr(rules.ACTION, required=True)
    payload = fields.Raw(allow_none=True)
    request_hash = fields.String(validate=validate.Regexp(r"^[0-9a-f]{64}$"))
    fencing_token = _token()
    operation_key = SharedStr(rules.OPERATION_KEY, load_default=None, allow_none=True)
    target = SharedStr(rules.TARGET, load_default=None, allow_none=True, validate=_key)
    requires_approval = _bool(load_default=False)


class BatchConfirmSchema(Strict):
    sized = {"receipt": "max_receipt_bytes"}

    operation_key = SharedStr(rules.OPERATION_KEY, required=True)
    fencing_token = _token()
    remote_id = RemoteId(required=True)
    receipt = _dict(load_default=dict)
    cost = _number(rules.COST, load_default=None, allow_none=True)


class BatchSchema(Strict):
    confirm = fields.List(fields.Nested(BatchConfirmSchema), load_default=list, validate=validate.Length(max=100))
    begin = fields.List(fields.Nested(BeginSchema), load_default=list, validate=validate.Length(max=100))


class ConfirmSchema(Strict):
    sized = {"receipt": "max_receipt_bytes"}

    fencing_token = _token()
    remote_id = RemoteId(required=True)
    receipt = _dict(load_default=dict)
    cost = _number(rules.COST, load_default=None, allow_none=True)


class FailSchema(Strict):
    sized = {"error": "max_receipt_bytes"}

    fencing_token = _token()
    retryable = _bool(load_default=True)
    error = _dict(load_default=dict)


class UnknownSchema(Strict):
    sized = {"error": "max_receipt_bytes"}

    fencing_token = _token()
    error = _dict(load_default=dict)


class OutcomeSchema(Strict):
    sized = {"receipt": "max_receipt_bytes", "error": "max_receipt_bytes"}

    fencing_token = _token()
    http_status = fields.Integer(load_default=None, allow_none=True, validate=validate.Range(min=100, max=599))
    error_kind = fields.String(load_default=None, allow_none=True,
                               validate=validate.OneOf(["timeout", "connection_reset", "connection_refused", "dns"]))
    remote_id = RemoteId(load_default=None, allow_none=True)
    receipt = _dict(load_default=dict)
    error = _dict(load_default=dict)
    cost = _number(rules.COST, load_default=None, allow_none=True)


class LookupResultSchema(Strict):
    """What the caller's own lookup found for one attempt of an in-flight operation (gate/lookup.py)."""

    sized = {"receipt": "max_receipt_bytes", "evidence": "max_receipt_bytes"}

    fencing_token = _token()
    attempt = fields.Integer(required=True, strict=True, validate=_int32(min=1))
    result = fields.String(required=True, validate=validate.OneOf(["found", "absent", "undecidable"]))
    remote_id = RemoteId(load_default=None, allow_none=True)
    receipt = _dict(load_default=dict)
    evidence = fields.Dict(load_default=dict)


class ArtifactSchema(Strict):
    role = fields.String(required=True, validate=_key)
    uri = fields.String(required=True, validate=validate.Length(min=1, max=2048))
    sha256 = fields.String(required=True, validate=validate.Regexp(r"^[0-9a-f]{64}$", error="sha256 must be 64 hex digits"))


class CheckpointSchema(Strict):
    sized = {"*": "max_checkpoint_bytes"}

    fencing_token = _token()
    phase = fields.String(required=True, validate=validate.Length(min=1, max=64))
    task_version = _number(rules.TASK_VERSION)
    artifacts = fields.List(fields.Nested(ArtifactSchema), load_default=list, validate=validate.Length(max=1000))
    remote = fields.Dict(load_default=dict)
    next_allowed_actions = fields.List(fields.String(validate=_key), load_default=list,
                                       validate=validate.Length(max=1000))
    approval_status = fields.String(load_default=None, allow_none=True, validate=validate.Length(max=64))


class ApprovalSchema(Strict):
    job_id = SharedStr(rules.JOB_ID, required=True)
    task_version = _number(rules.TASK_VERSION, required=True)
    action = SharedStr(rules.ACTION, required=True)
    content_digest = fields.String(required=True, validate=validate.Regexp(r"^[0-9a-f]{64}$"))
    target = SharedStr(rules.TARGET, required=True, validate=_key)
    expires_at = fields.String(required=True, validate=_expiry)
    note = fields.String(load_default=None, allow_none=True, validate=validate.Length(max=2000))


class CancelSchema(Strict):
    reason = SharedStr(rules.REASON, load_default=None, allow_none=True, validate=validate.Length(max=500))


class ReauthorizeSchema(Strict):
    policy_hash = fields.String(load_default=None, allow_none=True, validate=validate.Length(max=128))
    note = fields.String(load_default=None, allow_none=True, validate=validate.Length(max=2000))


class CurrentArtifactSchema(Strict):
    role = fields.String(required=True, validate=_key)
    sha256 = fields.String(required=True, validate=validate.Regexp(r"^[0-9a-f]{64}$"))
    uri = fields.String(load_default=None, allow_none=True, validate=validate.Length(max=2048))


class ResumeSchema(Strict):
    owner = SharedStr(rules.OWNER, required=True, validate=_key)
    ttl_s = _number(rules.TTL_S, load_default=None)
    takeover = _bool(load_default=False)
    artifacts = fields.List(fields.Nested(CurrentArtifactSchema), load_default=list, validate=validate.Length(max=1000))
    policy_hash = fields.String(load_default=None, allow_none=True, validate=validate.Length(max=128))


_instances = {}


def _instance(schema_cls):
    """Schemas are stateless once built; building one deep-copies every field (about 0.1 ms,
    on every gate call), so each class is built once per process."""
    schema = _instances.get(schema_cls)
    if schema is None:
        schema = _instances[schema_cls] = schema_cls()
    return schema


def load(schema_cls, request):
    """Parse the request body with ``schema_cls``: 400 for non-JSON, 413 past the body limit
    (raised by the read itself), 422 for bad values or fields."""
    raw = request.get_data(cache=True)
    data = limits.parse_json(raw) if raw.strip() else {}
    if not isinstance(data, dict):
        raise MalformedJson("request body must be a JSON object", {})
    schema = _instance(schema_cls)
    refusals.check_counts(schema, data)
    try:
        body = schema.load(data)
    except ValidationError as exc:
        raise refusals.validation_failed(exc.messages) from exc
    _check_sizes(schema_cls, body)
    if schema_cls is BatchSchema:
        for item in body["confirm"]:
            _check_sizes(BatchConfirmSchema, item)
    return body


def _check_sizes(schema_cls, body):
    cfg = current_app.config["DURABLE"]
    for name, attr in schema_cls.sized.items():
        checks.sized("body" if name == "*" else name, body if name == "*" else body.get(name), getattr(cfg, attr))
