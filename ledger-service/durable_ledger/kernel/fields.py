"""The ledger's field kinds as marshmallow fields, each declared once: the request bodies
(kernel/bodies.py) are built from them, and so are the HTTP validation, LocalLedger's checks,
the hot path's reads and /openapi.json. No Flask.

Where a kind has a grammar of its own (identifiers, labels, remote ids, expiries), its
validator is a subclass of marshmallow's own ``Length`` or ``Range``: the document shows the
bounds (apispec reads them from those classes), while the message is the grammar's one.
"""

import time
from datetime import datetime, timezone

from marshmallow import ValidationError, fields, validate

from .limits import BAD_ID_CHARS, INT32_MAX, INT32_MIN, MAX_COST_PER_CALL, MAX_JOB_COST, id_problem

MAX_APPROVAL_HORIZON_S = 100 * 365 * 86400
SHA256_PATTERN = r"^[0-9a-f]{64}$"


class IdGrammar(validate.Length):
    """An identifier (job id, action, operation key, target) by limits.id_problem's grammar: the
    one that keeps every stored key addressable by a URL."""

    def __init__(self, max_len=255, slashes=True):
        super().__init__(min=1, max=max_len)
        self.slashes = slashes

    def __call__(self, value):
        problem = id_problem(value, self.max, self.slashes)
        if problem:
            raise ValidationError(problem)
        return value


class LabelGrammar(validate.Length):
    """Owners and other names that are shown but never addressed: 1-255 characters, no control
    characters."""

    def __init__(self):
        super().__init__(min=1, max=255)

    def __call__(self, value):
        value = super().__call__(value)
        if BAD_ID_CHARS.search(value):
            raise ValidationError("must not contain control characters, NUL, surrogates or U+FFFD")
        return value


def _expiry(value):
    """An approval's expires_at: an ISO 8601 timestamp (UTC when it names no zone) at most 100
    years from now: a date near year 9999 in a far-west offset is year 10000 in UTC, stored but
    never rendered back (datetime.fromtimestamp overflows)."""
    try:
        ts = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ValidationError("must be an ISO 8601 timestamp") from None
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=timezone.utc)
    if ts.timestamp() > time.time() + MAX_APPROVAL_HORIZON_S:
        raise ValidationError("must be at most 100 years from now")


class RemoteId(fields.Raw):
    """The remote object's id: a string or an integer that fits the 255-character column."""

    def _deserialize(self, value, attr, data, **kwargs):
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise ValidationError("must be a string or an integer")
        if len(str(value)) > 255:
            raise ValidationError("must be at most 255 characters")
        return value


def identifier(max_len=255, slashes=True, **kwargs):
    return fields.String(validate=IdGrammar(max_len, slashes), **kwargs)


def job_id(**kwargs):
    return identifier(255, slashes=False, **kwargs)


def action(**kwargs):
    return identifier(255, **kwargs)


def operation_key(**kwargs):
    return identifier(512, **kwargs)


def target(**kwargs):
    """A remote's name ("wordpress:prod"): the identifier grammar."""
    return identifier(255, **kwargs)


def owner(**kwargs):
    return fields.String(validate=LabelGrammar(), **kwargs)


def text(lo=None, hi=None, **kwargs):
    return fields.String(validate=validate.Length(min=lo, max=hi), **kwargs)


def sha256(error=None, **kwargs):
    return fields.String(validate=validate.Regexp(SHA256_PATTERN, **({"error": error} if error else {})), **kwargs)


def expiry(**kwargs):
    return fields.String(validate=_expiry, **kwargs)


def integer(lo=INT32_MIN, hi=INT32_MAX, strict=True, **kwargs):
    """An integer column (PostgreSQL ``integer`` is 32-bit); ``strict``: no strings or floats."""
    return fields.Integer(strict=strict, validate=validate.Range(min=lo, max=hi), **kwargs)


def number(lo, hi, **kwargs):
    return fields.Float(validate=validate.Range(min=lo, max=hi), **kwargs)


def fencing_token(required=True, **kwargs):
    return integer(required=required, **kwargs)


def task_version(**kwargs):
    return integer(1, strict=False, **kwargs)


def ttl_s(**kwargs):
    return fields.Integer(validate=validate.Range(min=1, max=86400), load_default=None, **kwargs)


def live_s(**kwargs):
    """A holder's liveness from now (jobs/leases.py)."""
    return number(0, 3600, **{"load_default": None, "allow_none": True, **kwargs})


def cost(**kwargs):
    """One confirm's cost (a job's running total is checked by the confirm routes before adding)."""
    return number(0, MAX_COST_PER_CALL, load_default=None, allow_none=True, **kwargs)


def one_of(choices, **kwargs):
    return fields.String(validate=validate.OneOf(list(choices)), **kwargs)


def mapping(**kwargs):
    return fields.Dict(load_default=dict, **kwargs)


# A job's budgets: name -> field (kernel/bodies.py Budgets; kernel/checks.py stored_budgets).
BUDGETS = {
    "deadline_s": lambda: number(0, 10 * 365 * 86400),
    "max_cost": lambda: number(0, MAX_JOB_COST),
    "max_tool_calls": lambda: fields.Integer(validate=validate.Range(min=0, max=INT32_MAX)),
    "max_resume_attempts": lambda: fields.Integer(validate=validate.Range(min=0, max=INT32_MAX)),
    "max_attempts": lambda: fields.Integer(validate=validate.Range(min=1, max=100)),
}
GATE_BUDGETS = ("deadline_s", "max_cost", "max_tool_calls", "max_attempts")  # what a dispatch reads
