"""Input limits in one place: what the API (and the in-process client) refuse before the core
or a driver sees it. Plain Python, no Flask: durable_ledger/kernel/fields.py and checks.py (the
field and body checks both the routes and LocalLedger call) build on them.

Each refusal is a 4xx in the error shape (docs/api.md, "Limits"):

- the body: at most ``DURABLE_MAX_BODY_BYTES`` (413 ``payload_too_large``, Flask's
  MAX_CONTENT_LENGTH); JSON nested at most ``MAX_DEPTH`` levels (400 ``malformed_json``,
  checked *before* parsing: the C parser recurses and would hit Python's recursion limit at
  about 970 levels, a 500);
- every string, key or value: no NUL (PostgreSQL refuses them) and no lone surrogates (no
  driver can encode them), 422 ``invalid_value``;
- every number: finite (``NaN``/``Infinity`` and floats that overflow such as ``1e400``
  would make every later read of the row invalid JSON) and integers within 64 bits,
  422 ``invalid_value``;
- identifiers (job ids, operation keys, actions) follow one grammar, ``id_problem``, so that
  every stored key can be addressed by a URL and no URL can be bent onto another key.
"""

import json
import math
import re

from .errors import InvalidValue, MalformedJson

MAX_DEPTH = 64
INT32_MIN, INT32_MAX = -(2 ** 31), 2 ** 31 - 1  # PostgreSQL `integer` columns
INT64_MIN, INT64_MAX = -(2 ** 63), 2 ** 63 - 1  # what any client or column can hold
MAX_QUERY_VALUE = 1024
MAX_COST_PER_CALL = 1e12  # one confirm's cost
MAX_JOB_COST = 1e15  # a job's running total (checked by the confirm routes before adding)

BAD_TEXT = re.compile(r"[\x00\ud800-\udfff]")
# In identifiers also every control character, and U+FFFD: the WSGI layer decodes a path that
# is not UTF-8 (e.g. %ED%A0%80, an encoded surrogate) into U+FFFD, so it marks bytes we lost.
BAD_ID_CHARS = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff\ufffd]")
LONG_DIGITS = re.compile(rb"[0-9]{19}")
_EXPONENT = re.compile(rb"[eE][+-]?[0-9]")
# Where a lone surrogate can come from besides a \u escape: json.loads decodes bytes with
# "surrogatepass" (UTF-8 ED A0..BF), and UTF-16/32 bodies (NUL bytes) are decoded the same way.
_RAW_SURROGATE_OR_WIDE = re.compile(rb"\\u|\xed[\xa0-\xbf]|\x00")
_TOKENS = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]')


class _Refused(ValueError):
    def __init__(self, message, details):
        super().__init__(message)
        self.message, self.details = message, details


def _reject_constant(name):
    raise _Refused(f"non-finite number {name} is not JSON; send a finite number or null", {"value": name})


def _finite_float(text):
    value = float(text)
    if not math.isfinite(value):
        raise _Refused(f"number {text[:40]} overflows a 64-bit float", {"value": text[:40]})
    return value


def _bounded_int(text):
    # The length test comes first: int() of a 100,000-digit string is slow by design.
    value = int(text) if len(text) <= 21 else None
    if value is None or not INT64_MIN <= value <= INT64_MAX:
        raise _Refused(f"integer {text[:40]} is outside the 64-bit range", {"value": text[:40]})
    return value


def _depth(raw):
    """Nesting depth of a JSON text, without parsing it (strings are skipped whole)."""
    depth = deepest = 0
    for m in _TOKENS.finditer(raw):
        tok = m.group()
        if tok in (b"[", b"{"):
            depth += 1
            deepest = max(deepest, depth)
            if deepest > MAX_DEPTH:
                return deepest
        elif tok in (b"]", b"}"):
            depth -= 1
    return deepest


def parse_json(raw):
    """Bytes -> value, refusing everything listed in the module docstring."""
    if raw.count(b"[") + raw.count(b"{") > MAX_DEPTH and _depth(raw) > MAX_DEPTH:
        raise MalformedJson(f"JSON is nested deeper than {MAX_DEPTH} levels", {"max_depth": MAX_DEPTH})
    # The number hooks and the string walk cost a Python call per value (2.6 s for a 2 MiB body
    # of a million numbers); each is skipped when the raw text shows it cannot refuse anything.
    hooks = {}
    # An integer of 18 digits or fewer fits 64 bits; a float overflows only with an exponent or
    # 309+ digits.
    long_digits = LONG_DIGITS.search(raw)
    if long_digits:
        hooks["parse_int"] = _bounded_int
    if long_digits or _EXPONENT.search(raw):
        hooks["parse_float"] = _finite_float
    try:
        value = json.loads(raw, parse_constant=_reject_constant, **hooks)
    except _Refused as exc:
        raise InvalidValue(exc.message, exc.details) from exc
    except RecursionError as exc:  # not reachable after the depth check; kept as a backstop
        raise MalformedJson(f"JSON is nested deeper than {MAX_DEPTH} levels", {"max_depth": MAX_DEPTH}) from exc
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
        raise MalformedJson("request body is not valid JSON", {}) from exc
    if _RAW_SURROGATE_OR_WIDE.search(raw):  # else no string can hold a NUL or a lone surrogate
        check_strings(value)
    return value


def check_strings(value, path="$"):
    """Refuse NUL and lone surrogates in every key and string of ``value`` (iteratively)."""
    stack = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            _check_text(item, where)
        elif isinstance(item, dict):
            for k, v in item.items():
                _check_text(k, f"{where}.<key>")
                stack.append((v, f"{where}.{k[:40]}"))
        elif isinstance(item, list):
            stack.extend((v, f"{where}[{i}]") for i, v in enumerate(item))


def _check_text(text, where):
    m = BAD_TEXT.search(text)
    if m:
        what = "NUL character" if m.group() == "\x00" else "lone surrogate"
        raise InvalidValue(f"a string contains a {what}, which cannot be stored", {"path": where,
                                                                                   "codepoint": f"U+{ord(m.group()):04X}"})


def id_problem(value, max_len=255, slashes=True):
    """Why ``value`` is not an addressable identifier, or None. The grammar (docs/api.md):

    1..max_len characters; no control characters, surrogates or U+FFFD; no leading or trailing
    whitespace; and, because keys travel in URL paths (``/v1/operations/{key}/confirm``), no
    leading or trailing ``/``, no ``//`` and no ``.`` or ``..`` segment: a client library or
    proxy that normalises the path would otherwise address another key. ``slashes=False``
    (job ids: one path segment) refuses ``/`` altogether and ``.``/``..`` as the whole id.
    """
    if not isinstance(value, str) or not 1 <= len(value) <= max_len:
        return f"must be 1 to {max_len} characters"
    if BAD_ID_CHARS.search(value):
        return "must not contain control characters, NUL, surrogates or U+FFFD"
    if value != value.strip():
        return "must not start or end with whitespace"
    if not slashes and "/" in value:
        return "must not contain '/'"
    if value.startswith("/") or value.endswith("/") or "//" in value:
        return "must not start or end with '/' or contain '//'"
    if any(seg in (".", "..") for seg in value.split("/")):
        return "must not have a '.' or '..' segment"
    return None


def check_path_args(values):
    """URL path parameters, before any view runs (Flask ``url_value_preprocessor``)."""
    for name, value in (values or {}).items():
        problem = None
        if name == "job_id":
            problem = id_problem(value, 255, slashes=False)
        elif name == "key":
            problem = id_problem(value, 512)
        elif name == "approval_id" and not INT32_MIN <= value <= INT32_MAX:
            problem = "is out of range"
        elif isinstance(value, str) and BAD_ID_CHARS.search(value):
            problem = "must not contain control characters"
        if problem:
            raise InvalidValue(f"path parameter {name} {problem}", {"parameter": name})


FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


def check_request_text(request):
    """Query parameters always; form fields (the review page) when the body is a form. Other
    bodies are left unread here: the artifact route sets its own size limit before its read."""
    check_query_args(request.args)
    if request.mimetype in FORM_TYPES:
        check_query_args(request.form, max_len=20000)


def check_query_args(args, max_len=MAX_QUERY_VALUE):
    for name, value in args.items(multi=True):
        check_query_value(name, value, max_len)


def check_query_value(name, value, max_len=MAX_QUERY_VALUE):
    """One query parameter (LocalLedger checks its ``states`` list as the ``state`` parameter)."""
    # Form notes may span lines: only NUL and surrogates there; query values are identifiers.
    bad = BAD_TEXT if max_len != MAX_QUERY_VALUE else BAD_ID_CHARS
    if BAD_ID_CHARS.search(name) or bad.search(value) or len(value) > max_len:
        raise InvalidValue(f"parameter {name[:40]!r} has control characters or is too long",
                           {"parameter": name[:40], "max_length": max_len})
