"""The boundary checks the HTTP routes apply (api/schemas.py, limits.py), for LocalLedger.

The core trusts its callers: the API checks identifiers, values and sizes before the core sees
them. A library caller skips the API, so LocalLedger checks the same things here, with the
grammar and bounds of durable_ledger/limits.py, and refuses with the same classes
(ValidationFailed 422, InvalidValue 422) the routes answer.
"""

import math

from ..core.digest import canonical_json
from ..errors import InvalidValue, MalformedJson, ValidationFailed
from ..limits import (
    BAD_TEXT,
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    MAX_COST_PER_CALL,
    MAX_DEPTH,
    MAX_JOB_COST,
    id_problem,
)

INT32 = (INT32_MIN, INT32_MAX)
INT64 = (INT64_MIN, INT64_MAX)


def refuse(field, problem):
    raise ValidationFailed("request validation failed", {"fields": {field: [problem]}})


def identifier(field, value, max_len=255, slashes=True, optional=False):
    if optional and value is None:
        return
    problem = id_problem(value, max_len, slashes)
    if problem:
        refuse(field, problem)


def token(value, field="fencing_token"):
    if isinstance(value, bool) or not isinstance(value, int) or not INT32[0] <= value <= INT32[1]:
        refuse(field, "must be a 32-bit integer")


def values(value, path="$", depth=1):
    """What every JSON body must hold: no NUL or lone surrogate, finite numbers, 64-bit integers,
    at most 64 levels of nesting. ``depth``: the containers around ``value`` in its body (a
    field of the body object: 1)."""
    stack = [(value, path, depth)]
    while stack:
        item, where, level = stack.pop()
        if isinstance(item, str):
            _text(item, where)
        elif isinstance(item, float) and not math.isfinite(item):
            raise InvalidValue("numbers must be finite", {"path": where})
        elif isinstance(item, int) and not isinstance(item, bool) and not INT64[0] <= item <= INT64[1]:
            raise InvalidValue("integers must fit 64 bits", {"path": where})
        elif isinstance(item, (dict, list, tuple)) and level >= MAX_DEPTH:
            raise MalformedJson(f"JSON is nested deeper than {MAX_DEPTH} levels", {"max_depth": MAX_DEPTH})
        elif isinstance(item, dict):
            for k, v in item.items():
                _text(str(k), f"{where}.<key>")
                stack.append((v, f"{where}.{str(k)[:40]}", level + 1))
        elif isinstance(item, (list, tuple)):
            stack.extend((v, f"{where}[{i}]", level + 1) for i, v in enumerate(item))


def _text(text, where):
    m = BAD_TEXT.search(text)
    if m:
        what = "NUL character" if m.group() == "\x00" else "lone surrogate"
        raise InvalidValue(f"a string contains a {what}, which cannot be stored",
                           {"path": where, "codepoint": f"U+{ord(m.group()):04X}"})


def sized(field, value, limit):
    """A receipt or error object: a dict of at most ``limit`` bytes of canonical JSON."""
    if not isinstance(value, dict):
        refuse(field, "Not a valid mapping type.")
    values(value, f"$.{field}")
    if len(canonical_json(value)) > limit:
        raise ValidationFailed(f"{field} is larger than {limit} bytes of JSON",
                               {"fields": {field: [f"at most {limit} bytes of JSON"]}, "max_bytes": limit})


def remote_id(value):
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        refuse("remote_id", "must be a string or an integer")
    if len(str(value)) > 255:
        refuse("remote_id", "must be at most 255 characters")
    if isinstance(value, str):
        _text(value, "$.remote_id")


def cost(value, job_cost):
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= MAX_COST_PER_CALL:
        refuse("cost", f"must be between 0 and {MAX_COST_PER_CALL:g}")
    if value and job_cost() + value > MAX_JOB_COST:
        raise InvalidValue(f"the job's cost total would pass {MAX_JOB_COST:g}",
                           {"field": "cost", "max_total": MAX_JOB_COST})
