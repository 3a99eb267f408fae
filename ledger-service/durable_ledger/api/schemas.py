"""Request validation (marshmallow). Unknown fields are refused so typos surface as 422."""

from marshmallow import RAISE, Schema, ValidationError, fields, validate

from ..errors import MalformedJson, ValidationFailed

_key = validate.Length(min=1, max=255)


class Strict(Schema):
    class Meta:
        unknown = RAISE


class BudgetsSchema(Strict):
    deadline_s = fields.Float(validate=validate.Range(min=0))
    max_cost = fields.Float(validate=validate.Range(min=0))
    max_tool_calls = fields.Integer(validate=validate.Range(min=0))
    max_resume_attempts = fields.Integer(validate=validate.Range(min=0))
    max_attempts = fields.Integer(validate=validate.Range(min=1, max=100))


class JobPutSchema(Strict):
    task_version = fields.Integer(load_default=1, validate=validate.Range(min=1))
    pipeline = fields.String(load_default="generic", validate=validate.Length(min=1, max=64))
    phases = fields.List(fields.String(validate=validate.Length(min=1, max=64)), load_default=None,
                         validate=validate.Length(min=1, max=100))
    budgets = fields.Nested(BudgetsSchema, load_default=dict)
    session_id = fields.String(load_default=None, allow_none=True, validate=_key)
    policy_hash = fields.String(load_default=None, allow_none=True, validate=validate.Length(max=128))


class TokenSchema(Strict):
    fencing_token = fields.Integer(required=True, strict=True)


class LeaseSchema(Strict):
    owner = fields.String(required=True, validate=_key)
    ttl_s = fields.Integer(load_default=None, validate=validate.Range(min=1, max=86400))
    takeover = fields.Boolean(load_default=False)


class LeaseRenewSchema(Strict):
    owner = fields.String(required=True, validate=_key)
    fencing_token = fields.Integer(required=True, strict=True)
    ttl_s = fields.Integer(load_default=None, validate=validate.Range(min=1, max=86400))


class LeaseReleaseSchema(Strict):
    owner = fields.String(required=True, validate=_key)
    fencing_token = fields.Integer(required=True, strict=True)


class BeginSchema(Strict):
    job_id = fields.String(required=True, validate=_key)
    action = fields.String(required=True, validate=_key)
    payload = fields.Raw(allow_none=True)
    request_hash = fields.String(validate=validate.Regexp(r"^[0-9a-f]{64}$"))
    fencing_token = fields.Integer(required=True, strict=True)
    operation_key = fields.String(load_default=None, allow_none=True, validate=validate.Length(min=1, max=512))
    target = fields.String(load_default=None, allow_none=True, validate=_key)
    requires_approval = fields.Boolean(load_default=False)


class BatchConfirmSchema(Strict):
    operation_key = fields.String(required=True, validate=validate.Length(min=1, max=512))
    fencing_token = fields.Integer(required=True, strict=True)
    remote_id = fields.Raw(required=True)
    receipt = fields.Dict(load_default=dict)
    cost = fields.Float(load_default=None, allow_none=True, validate=validate.Range(min=0))


class BatchSchema(Strict):
    confirm = fields.List(fields.Nested(BatchConfirmSchema), load_default=list, validate=validate.Length(max=100))
    begin = fields.List(fields.Nested(BeginSchema), load_default=list, validate=validate.Length(max=100))


class ConfirmSchema(Strict):
    fencing_token = fields.Integer(required=True, strict=True)
    remote_id = fields.Raw(required=True)
    receipt = fields.Dict(load_default=dict)
    cost = fields.Float(load_default=None, allow_none=True, validate=validate.Range(min=0))


class FailSchema(Strict):
    fencing_token = fields.Integer(required=True, strict=True)
    retryable = fields.Boolean(load_default=True)
    error = fields.Dict(load_default=dict)


class UnknownSchema(Strict):
    fencing_token = fields.Integer(required=True, strict=True)
    error = fields.Dict(load_default=dict)


class OutcomeSchema(Strict):
    fencing_token = fields.Integer(required=True, strict=True)
    http_status = fields.Integer(load_default=None, allow_none=True, validate=validate.Range(min=100, max=599))
    error_kind = fields.String(load_default=None, allow_none=True,
                               validate=validate.OneOf(["timeout", "connection_reset", "connection_refused", "dns"]))
    remote_id = fields.Raw(load_default=None, allow_none=True)
    receipt = fields.Dict(load_default=dict)
    error = fields.Dict(load_default=dict)
    cost = fields.Float(load_default=None, allow_none=True, validate=validate.Range(min=0))


class ArtifactSchema(Strict):
    role = fields.String(required=True, validate=_key)
    uri = fields.String(required=True, validate=validate.Length(min=1, max=2048))
    sha256 = fields.String(required=True, validate=validate.Regexp(r"^[0-9a-f]{64}$", error="sha256 must be 64 hex digits"))


class CheckpointSchema(Strict):
    fencing_token = fields.Integer(required=True, strict=True)
    phase = fields.String(required=True, validate=validate.Length(min=1, max=64))
    task_version = fields.Integer(validate=validate.Range(min=1))
    artifacts = fields.List(fields.Nested(ArtifactSchema), load_default=list)
    remote = fields.Dict(load_default=dict)
    next_allowed_actions = fields.List(fields.String(), load_default=list)
    approval_status = fields.String(load_default=None, allow_none=True)


class ApprovalSchema(Strict):
    job_id = fields.String(required=True, validate=_key)
    task_version = fields.Integer(required=True, validate=validate.Range(min=1))
    action = fields.String(required=True, validate=_key)
    content_digest = fields.String(required=True, validate=validate.Regexp(r"^[0-9a-f]{64}$"))
    target = fields.String(required=True, validate=_key)
    expires_at = fields.String(required=True)
    note = fields.String(load_default=None, allow_none=True, validate=validate.Length(max=2000))


class CancelSchema(Strict):
    reason = fields.String(load_default=None, allow_none=True, validate=validate.Length(max=500))


class ReauthorizeSchema(Strict):
    policy_hash = fields.String(load_default=None, allow_none=True, validate=validate.Length(max=128))
    note = fields.String(load_default=None, allow_none=True, validate=validate.Length(max=2000))


class CurrentArtifactSchema(Strict):
    role = fields.String(required=True, validate=_key)
    sha256 = fields.String(required=True, validate=validate.Regexp(r"^[0-9a-f]{64}$"))
    uri = fields.String(load_default=None, allow_none=True)


class ResumeSchema(Strict):
    owner = fields.String(required=True, validate=_key)
    ttl_s = fields.Integer(load_default=None, validate=validate.Range(min=1, max=86400))
    takeover = fields.Boolean(load_default=False)
    artifacts = fields.List(fields.Nested(CurrentArtifactSchema), load_default=list)
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
    """Parse the request body with ``schema_cls``: 400 for non-JSON, 422 for bad fields."""
    data = request.get_json(silent=True)
    if data is None:
        raw = request.get_data(cache=True)
        if raw.strip():
            raise MalformedJson("request body is not valid JSON", {})
        data = {}
    if not isinstance(data, dict):
        raise MalformedJson("request body must be a JSON object", {})
    try:
        return _instance(schema_cls).load(data)
    except ValidationError as exc:
        raise ValidationFailed("request validation failed", {"fields": exc.messages}) from exc
