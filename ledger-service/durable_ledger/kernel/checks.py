"""A whole request body checked as HTTP checks it, for LocalLedger (`body`), in HTTP's order:

1. its size as HttpLedger sends it (``encode``) against ``DURABLE_MAX_BODY_BYTES``:
   413 ``payload_too_large``, ``{"max_bytes"}``;
2. what every JSON body must hold (``values``): no NUL or lone surrogate, finite numbers,
   64-bit integers (422 ``invalid_value``), at most 64 levels (400 ``malformed_json``);
3. the body's declaration (kernel/bodies.py `read`, the routes' reader): fields, item counts,
   sizes.

`stored_budgets` reads a job's budgets with the declared kinds, for rows written before they
covered budgets: a budget that is not a number is refused (409 ``stored_value_invalid``),
never a 500 and never a guessed limit.
"""

import json
import math

from marshmallow import fields

from . import bodies
from .errors import InvalidValue, MalformedJson, PayloadTooLarge, StoredValueInvalid, ValidationFailed
from .fields import GATE_BUDGETS
from .limits import BAD_TEXT, INT64_MAX, INT64_MIN, LONG_DIGITS, MAX_DEPTH, id_problem


def encode(body):
    """A body as HttpLedger sends it; what LocalLedger measures. A value JSON cannot hold (a set,
    bytes, an object) is the caller's bad value on both transports."""
    try:
        return json.dumps(body).encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise InvalidValue(f"a value is not JSON ({type(exc).__name__}: {str(exc)[:200]})", {}) from None


def body(schema_cls, value, cfg):
    """``value`` (the body HttpLedger would send) checked in HTTP's order; what the route reads."""
    encoded = encode(value)
    if len(encoded) > cfg.max_body_bytes:
        raise PayloadTooLarge(f"the request body is larger than {cfg.max_body_bytes} bytes",
                              {"max_bytes": cfg.max_body_bytes})
    if may_hold_bad_values(encoded):
        values(value, "$", 0)
    return bodies.read(schema_cls, value, cfg)


def refuse(field, problem):
    raise ValidationFailed("request validation failed", {"fields": {field: [problem]}})


def identifier(field, value, max_len=255, slashes=True, optional=False):
    """A path parameter the client puts in a URL (job id, operation key)."""
    if optional and value is None:
        return
    problem = id_problem(value, max_len, slashes)
    if problem:
        refuse(field, problem)


def may_hold_bad_values(encoded):
    """False when `values` provably finds nothing in the value ``encoded`` is `encode`'s text of:
    json.dumps escapes every non-ASCII character (so a NUL or a surrogate shows as a \\u
    escape), writes NaN and Infinity as such, an integer outside 64 bits has 19+ digits, and a
    value nested 64 deep has at least 64 brackets. The walk below costs a Python call per value."""
    return (b"\\u" in encoded or b"NaN" in encoded or b"Infinity" in encoded or LONG_DIGITS.search(encoded)
            is not None or encoded.count(b"[") + encoded.count(b"{") >= MAX_DEPTH)


def values(value, path="$", depth=1):
    """What every JSON body must hold: no NUL or lone surrogate, finite numbers, 64-bit integers,
    at most 64 levels of nesting. ``depth``: the containers around ``value`` in its body (the
    body itself: 0; a field of the body object: 1)."""
    stack = [(value, path, depth)]
    while stack:
        item, where, level = stack.pop()
        if isinstance(item, str):
            _text(item, where)
        elif isinstance(item, float) and not math.isfinite(item):
            raise InvalidValue("numbers must be finite", {"path": where})
        elif isinstance(item, int) and not isinstance(item, bool) and not INT64_MIN <= item <= INT64_MAX:
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


def stored_budgets(job, names=GATE_BUDGETS):
    """The job's budgets ``names`` as numbers (a stored null: no limit, as always). Only the
    types are checked: a limit outside today's input range was accepted when it was stored and
    still means what it said."""
    b = job.budgets
    if b is None:
        return {}
    if not isinstance(b, dict):
        raise StoredValueInvalid(f"job '{job.job_id}' has budgets that are not an object; cancel it and start a new job",
                                 {"job_id": job.job_id, "field": "budgets"})
    out = {}
    for name in names:
        if b.get(name) is None:
            continue
        try:
            out[name] = _stored_number(bodies.BudgetsSchema._declared_fields[name], b[name])
        except (TypeError, ValueError, OverflowError):
            raise StoredValueInvalid(f"job '{job.job_id}' has a {name} budget that is not a number; "
                                     "cancel it and start a new job", {"job_id": job.job_id, "field": f"budgets.{name}"}) from None
    return out


def _stored_number(field, value):
    """A stored budget as the number its field declares, without today's range."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise TypeError(type(value).__name__)
    out = (int if isinstance(field, fields.Integer) else float)(value)
    if isinstance(out, float) and not math.isfinite(out):
        raise ValueError("not finite")
    return out
