"""Request validation (marshmallow). Unknown fields are refused so typos surface as 422.

Value limits match the columns on both backends (PostgreSQL ``integer`` is 32-bit, strings are
``varchar(n)``); the limits every body shares (depth, NUL, surrogates, non-finite numbers) are
applied while parsing, in ``limits.parse_json``.
"""

import time
from datetime import datetime, timezone

from flask import current_app
from marshmallow import RAISE, Schema, ValidationError, fields, validate

from ..core.digest import canonical_json
from ..errors import MalformedJson, ValidationFailed
from .. import limits
from ..limits import MAX_COST_PER_CALL, MAX_JOB_COST

_key = validate.Length(min=1, max=255)
MAX_APPROVAL_HORIZON_S = 100 * 365 * 86400


def _int32(min=limits.INT32_MIN, max=limits.INT32_MAX):
    return validate.Range(min=min, max=max)


def _identifier(max_len=255, slashes=True):
    def check(value):
        problem = limits.id_problem(value, max_len, slashes)
        if problem:
            raise ValidationError(problem)
    return check


_job_id = _identifier(255, slashes=False)
_action = _identifier(255)
_operation_key = _identifier(512)


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


class RemoteId(fields.Raw):
    """The remote object's id: a string or an integer that fits the 255-character column."""

    def _deserialize(self, value, attr, data, **kwargs):
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise ValidationError("must be a string or an integer")
        if len(str(value)) > 255:
            raise ValidationError("must be at most 255 characters")
        return value


class Strict(Schema):
    class Meta:
        unknown = RAISE

    # field -> Config attribute with its size limit in bytes of canonical JSON ("*": the whole body)
    sized = {}


class BudgetsSchema(Strict):
    deadline_s = fields.Float(validate=validate.Range(min=0, max=10 * 365 * 86400))
    max_cost = fields.Float(validate=validate.Range(min=0, max=MAX_JOB_COST))
    max_tool_calls = fields.Integer(validate=_int32(min=0))
    max_resume_attempts = fields.Integer(validate=_int32(min=0))
    max_attempts = fields.Integer(validate=validate.Range(min=1, max=100))


class JobPutSchema(Strict):
    task_version = fields.Integer(load_default=1, validate=_int32(min=1))
    pipeline = fields.String(load_default="generic", validate=validate.Length(min=1, max=64))
    phases = fields.List(fields.String(validate=validate.Length(min=1, max=64)), load_default=None,
                         validate=validate.Length(min=1, max=100))
    budgets = fields.Nested(BudgetsSchema, load_default=dict)
    session_id = fields.String(load_default=None, allow_none=True, validate=_key)
    policy_hash = fields.String(load_default=None, allow_none=True, validate=validate.Length(max=128))


class TokenSchema(Strict):
    fencing_token = fields.Integer(required=True, strict=True, validate=_int32())


class LeaseSchema(Strict):
    owner = fields.String(required=True, validate=_key)
    ttl_s = fields.Integer(load_default=None, validate=validate.Range(min=1, max=86400))
    takeover = fields.Boolean(load_default=False)


class LeaseRenewSchema(Strict):
    owner = fields.String(required=True, validate=_key)
    fencing_token = fields.Integer(required=True, strict=True, validate=_int32())
    ttl_s = fields.Integer(load_default=None, validate=validate.Range(min=1, max=86400))


class LeaseReleaseSchema(Strict):
    owner = fields.String(required=True, validate=_key)
    fencing_token = fields.Integer(required=True, strict=True, validate=_int32())


class BeginSchema(Strict):
    job_id = fields.String(required=True, validate=_job_id)
    action = fields.String(required=True, validate=_action)
    payload = fields.Raw(allow_none=True)
    request_hash = fields.String(validate=validate.Regexp(r"^[0-9a-f]{64}$"))
    fencing_token = fields.Integer(required=True, strict=True, validate=_int32())
    operation_key = fields.String(load_default=None, allow_none=True, validate=_operation_key)
    target = fields.String(load_default=None, allow_none=True, validate=_key)
    requires_approval = fields.Boolean(load_default=False)


class BatchConfirmSchema(Strict):
    sized = {"receipt": "max_receipt_bytes"}

    operation_key = fields.String(required=True, validate=_operation_key)
    fencing_token = fields.Integer(required=True, strict=True, validate=_int32())
    remote_id = RemoteId(required=True)
    receipt = fields.Dict(load_default=dict)
    cost = fields.Float(load_default=None, allow_none=True, validate=validate.Range(min=0, max=MAX_COST_PER_CALL))


class BatchSchema(Strict):
    confirm = fields.List(fields.Nested(BatchConfirmSchema), load_default=list, validate=validate.Length(max=100))
    begin = fields.List(fields.Nested(BeginSchema), load_default=list, validate=validate.Length(max=100))


class ConfirmSchema(Strict):
    sized = {"receipt": "max_receipt_bytes"}

    fencing_token = fields.Integer(required=True, strict=True, validate=_int32())
    remote_id = RemoteId(required=True)
    receipt = fields.Dict(load_default=dict)
    cost = fields.Float(load_default=None, allow_none=True, validate=validate.Range(min=0, max=MAX_COST_PER_CALL))


class FailSchema(Strict):
    sized = {"error": "max_receipt_bytes"}

    fencing_token = fields.Integer(required=True, strict=True, validate=_int32())
    retryable = fields.Boolean(load_default=True)
    error = fields.Dict(load_default=dict)


class UnknownSchema(Strict):
    sized = {"error": "max_receipt_bytes"}

    fencing_token = fields.Integer(required=True, strict=True, validate=_int32())
    error = fields.Dict(load_default=dict)


class OutcomeSchema(Strict):
    sized = {"receipt": "max_receipt_bytes", "error": "max_receipt_bytes"}

    fencing_token = fields.Integer(required=True, strict=True, validate=_int32())
    http_status = fields.Integer(load_default=None, allow_none=True, validate=validate.Range(min=100, max=599))
    error_kind = fields.String(load_default=None, allow_none=True,
                               validate=validate.OneOf(["timeout", "connection_reset", "connection_refused", "dns"]))
    remote_id = RemoteId(load_default=None, allow_none=True)
    receipt = fields.Dict(load_default=dict)
    error = fields.Dict(load_default=dict)
    cost = fields.Float(load_default=None, allow_none=True, validate=validate.Range(min=0, max=MAX_COST_PER_CALL))


class LookupResultSchema(Strict):
    """What the caller's own lookup found for one attempt of an in-flight operation (core/lookup.py)."""

    sized = {"receipt": "max_receipt_bytes", "evidence": "max_receipt_bytes"}

    fencing_token = fields.Integer(required=True, strict=True, validate=_int32())
    attempt = fields.Integer(required=True, strict=True, validate=_int32(min=1))
    result = fields.String(required=True, validate=validate.OneOf(["found", "absent", "undecidable"]))
    remote_id = RemoteId(load_default=None, allow_none=True)
    receipt = fields.Dict(load_default=dict)
    evidence = fields.Dict(load_default=dict)


class ArtifactSchema(Strict):
    role = fields.String(required=True, validate=_key)
    uri = fields.String(required=True, validate=validate.Length(min=1, max=2048))
    sha256 = fields.String(required=True, validate=validate.Regexp(r"^[0-9a-f]{64}$", error="sha256 must be 64 hex digits"))


class CheckpointSchema(Strict):
    sized = {"*": "max_checkpoint_bytes"}

    fencing_token = fields.Integer(required=True, strict=True, validate=_int32())
    phase = fields.String(required=True, validate=validate.Length(min=1, max=64))
    task_version = fields.Integer(validate=_int32(min=1))
    artifacts = fields.List(fields.Nested(ArtifactSchema), load_default=list, validate=validate.Length(max=1000))
    remote = fields.Dict(load_default=dict)
    next_allowed_actions = fields.List(fields.String(validate=_key), load_default=list,
                                       validate=validate.Length(max=1000))
    approval_status = fields.String(load_default=None, allow_none=True, validate=validate.Length(max=64))


class ApprovalSchema(Strict):
    job_id = fields.String(required=True, validate=_job_id)
    task_version = fields.Integer(required=True, validate=_int32(min=1))
    action = fields.String(required=True, validate=_action)
    content_digest = fields.String(required=True, validate=validate.Regexp(r"^[0-9a-f]{64}$"))
    target = fields.String(required=True, validate=_key)
    expires_at = fields.String(required=True, validate=_expiry)
    note = fields.String(load_default=None, allow_none=True, validate=validate.Length(max=2000))


class CancelSchema(Strict):
    reason = fields.String(load_default=None, allow_none=True, validate=validate.Length(max=500))


class ReauthorizeSchema(Strict):
    policy_hash = fields.String(load_default=None, allow_none=True, validate=validate.Length(max=128))
    note = fields.String(load_default=None, allow_none=True, validate=validate.Length(max=2000))


class CurrentArtifactSchema(Strict):
    role = fields.String(required=True, validate=_key)
    sha256 = fields.String(required=True, validate=validate.Regexp(r"^[0-9a-f]{64}$"))
    uri = fields.String(load_default=None, allow_none=True, validate=validate.Length(max=2048))


class ResumeSchema(Strict):
    owner = fields.String(required=True, validate=_key)
    ttl_s = fields.Integer(load_default=None, validate=validate.Range(min=1, max=86400))
    takeover = fields.Boolean(load_default=False)
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
    try:
        body = _instance(schema_cls).load(data)
    except ValidationError as exc:
        raise ValidationFailed("request validation failed", {"fields": exc.messages}) from exc
    _check_sizes(schema_cls, body)
    if schema_cls is BatchSchema:
        for item in body["confirm"]:
            _check_sizes(BatchConfirmSchema, item)
    return body


def _check_sizes(schema_cls, body):
    cfg = current_app.config["DURABLE"]
    for name, attr in schema_cls.sized.items():
        limit = getattr(cfg, attr)
        value = body if name == "*" else body.get(name)
        if value is not None and len(canonical_json(value)) > limit:
            field = "body" if name == "*" else name
            raise ValidationFailed(f"{field} is larger than {limit} bytes of JSON",
                                   {"fields": {field: [f"at most {limit} bytes of JSON"]}, "max_bytes": limit})
