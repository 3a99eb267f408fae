"""The input checks, once, for both doors: the HTTP routes (web/schemas.py wraps each field
check in a marshmallow field) and LocalLedger (client/local.py calls them directly). Plain
Python, no Flask and no marshmallow, so the in-process client loads neither.

A field check takes the caller's value and returns it normalised, as the HTTP schema always
read it (an integer field given ``"5"`` or ``5.0`` gives 5), or raises `Problem` with
marshmallow's own messages. `body` runs a whole request body through the order HTTP applies:

1. its size as HttpLedger sends it (``encode``) against ``DURABLE_MAX_BODY_BYTES``:
   413 ``payload_too_large``, ``{"max_bytes"}``;
2. what every JSON body must hold (``values``): no NUL or lone surrogate, finite numbers,
   64-bit integers (422 ``invalid_value``), at most 64 levels (400 ``malformed_json``);
3. every field: 422 ``validation_error`` with ``{"fields": {name: [message]}}``;
4. receipts and errors: at most ``DURABLE_MAX_RECEIPT_BYTES`` of canonical JSON (422, ``max_bytes``).

`stored_budgets` reads a job's budgets with the same checks, for rows written before they
covered budgets: a budget that is not a number is refused (409 ``stored_value_invalid``),
never a 500 and never a guessed limit.
"""

import json
import math
import re
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Callable

from .digest import canonical_json
from .errors import InvalidValue, MalformedJson, PayloadTooLarge, StoredValueInvalid, ValidationFailed
from .limits import (
    BAD_ID_CHARS,
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

NULL = "Field may not be null."
UNKNOWN = "Unknown field."
NOT_MAPPING = "Not a valid mapping type."
TRUTHY = {"t", "T", "true", "True", "TRUE", "on", "On", "ON", "y", "Y", "yes", "Yes", "YES", "1", 1}
FALSY = {"f", "F", "false", "False", "FALSE", "off", "Off", "OFF", "n", "N", "no", "No", "NO", "0", 0}


class Problem(ValueError):
    """A value a field check refuses; ``messages``: a list of strings, or field -> list."""

    def __init__(self, messages):
        super().__init__(messages)
        self.messages = messages if isinstance(messages, (list, dict)) else [messages]


def _null(nullable):
    if not nullable:
        raise Problem(NULL)


@dataclass(frozen=True)
class Number:
    """An integer (``kind=int``; ``strict``: no strings or floats) or a float in [lo, hi]."""

    kind: type
    lo: float
    hi: float
    strict: bool = False
    nullable: bool = False

    def read(self, value):
        """The value as a number of ``kind``, without the range (what a stored value needs)."""
        invalid = "Not a valid integer." if self.kind is int else "Not a valid number."
        if isinstance(value, bool) or (self.strict and not isinstance(value, int)):
            raise Problem(invalid)
        try:
            out = self.kind(value)
        except OverflowError:
            raise Problem("Number too large.") from None
        except (TypeError, ValueError):
            raise Problem(invalid) from None
        if self.kind is float and not math.isfinite(out):
            raise Problem("Special numeric values (nan or infinity) are not permitted.")
        return out

    def __call__(self, value):
        if value is None:
            return _null(self.nullable)
        out = self.read(value)
        if not self.lo <= out <= self.hi:
            raise Problem(f"Must be greater than or equal to {self.lo} and less than or equal to {self.hi}.")
        return out


@dataclass(frozen=True)
class Text:
    """A string of lo..hi characters (None: no bound) that ``grammar`` (value -> problem) accepts."""

    lo: int | None = None
    hi: int | None = None
    grammar: Callable | None = None
    nullable: bool = False

    def __call__(self, value):
        if value is None:
            return _null(self.nullable)
        if not isinstance(value, str):
            raise Problem("Not a valid string.")
        if self.grammar is not None:
            problem = self.grammar(value)
            if problem:
                raise Problem(problem)
        elif (self.lo is not None and len(value) < self.lo) or (self.hi is not None and len(value) > self.hi):
            raise Problem(_length_message(self.lo, self.hi))
        return value


def _length_message(lo, hi):
    if lo is None:
        return f"Longer than maximum length {hi}."
    if hi is None:
        return f"Shorter than minimum length {lo}."
    return f"Length must be between {lo} and {hi}."


def boolean(value):
    try:
        if value in TRUTHY:
            return True
        if value in FALSY:
            return False
    except TypeError:  # unhashable (a list, a dict)
        pass
    if value is None:
        raise Problem(NULL)
    raise Problem("Not a valid boolean.")


def _identifier(max_len, slashes=True):
    return lambda value: id_problem(value, max_len, slashes)


def _label(value):
    """Owners and other names that are shown but never addressed: no control characters."""
    if not 1 <= len(value) <= 255:
        return _length_message(1, 255)
    return "must not contain control characters, NUL, surrogates or U+FFFD" if BAD_ID_CHARS.search(value) else None


JOB_ID = Text(grammar=_identifier(255, slashes=False))
ACTION = Text(grammar=_identifier(255))
OPERATION_KEY = Text(grammar=_identifier(512), nullable=True)
TARGET = Text(grammar=_identifier(255), nullable=True)  # a remote's name ("wordpress:prod"), one grammar
OWNER = Text(grammar=_label)
FENCING_TOKEN = Number(int, INT32_MIN, INT32_MAX, strict=True)
TASK_VERSION = Number(int, 1, INT32_MAX)
TTL_S = Number(int, 1, 86400, nullable=True)
COST = Number(float, 0, MAX_COST_PER_CALL, nullable=True)
PIPELINE = Text(1, 64)
PHASE = Text(1, 64)
POLICY_HASH = Text(None, 128, nullable=True)
SESSION_ID = Text(1, 255, nullable=True)
REASON = Text(None, 500, nullable=True)
BUDGETS = {
    "deadline_s": Number(float, 0, 10 * 365 * 86400),
    "max_cost": Number(float, 0, MAX_JOB_COST),
    "max_tool_calls": Number(int, 0, INT32_MAX),
    "max_resume_attempts": Number(int, 0, INT32_MAX),
    "max_attempts": Number(int, 1, 100),
}
GATE_BUDGETS = ("deadline_s", "max_cost", "max_tool_calls", "max_attempts")  # what a dispatch reads


def budgets(value):
    if value is None:
        raise Problem(NULL)
    if not isinstance(value, dict):
        raise Problem({"_schema": ["Invalid input type."]})
    out, errors = {}, {}
    for name, v in value.items():
        check = BUDGETS.get(name)
        try:
            if check is None:
                raise Problem(UNKNOWN)
            out[name] = check(v)
        except Problem as exc:
            errors[name] = exc.messages
    if errors:
        raise Problem(errors)
    return out


def phases(value):
    if value is None:
        return None
    if not isinstance(value, (list, tuple)):
        raise Problem("Not a valid list.")
    errors = {}
    for i, item in enumerate(value):
        try:
            PHASE(item)
        except Problem as exc:
            errors[i] = exc.messages
    if errors:
        raise Problem(errors)
    if not 1 <= len(value) <= 100:
        raise Problem(_length_message(1, 100))
    return list(value)


def remote_id(value):
    """The remote object's id: a string or an integer that fits the 255-character column."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise Problem("must be a string or an integer")
    if len(str(value)) > 255:
        raise Problem("must be at most 255 characters")
    return value


def required_remote_id(value):
    """remote_id where the schema requires it and allows no null (a batch's confirm)."""
    if value is None:
        raise Problem(NULL)
    return remote_id(value)


def mapping(value):
    if value is None:
        raise Problem(NULL)
    if not isinstance(value, dict):
        raise Problem(NOT_MAPPING)
    return value


def anything(value):
    return value


@dataclass(frozen=True)
class OneOf:
    """A string among ``choices`` (marshmallow's OneOf), or None when ``nullable``."""

    choices: tuple
    nullable: bool = False

    def __call__(self, value):
        if value is None:
            return _null(self.nullable)
        if value not in self.choices:
            raise Problem(f"Must be one of: {', '.join(self.choices)}.")
        return value


@dataclass(frozen=True)
class Pattern:
    """A string that matches ``regex`` in full, or None when ``nullable``."""

    regex: str
    message: str = "String does not match expected pattern."
    nullable: bool = False

    def __call__(self, value):
        if value is None:
            return _null(self.nullable)
        if not isinstance(value, str):
            raise Problem("Not a valid string.")
        if re.fullmatch(self.regex, value) is None:
            raise Problem(self.message)
        return value


@dataclass(frozen=True)
class ListOf:
    """A list of at most ``hi`` items, each checked by ``item``."""

    item: Callable
    hi: int

    def __call__(self, value):
        if value is None:
            raise Problem(NULL)
        if not isinstance(value, (list, tuple)):
            raise Problem("Not a valid list.")
        errors, out = {}, []
        for i, v in enumerate(value):
            try:
                out.append(self.item(v))
            except Problem as exc:
                errors[i] = exc.messages
        if errors:
            raise Problem(errors)
        if len(out) > self.hi:
            raise Problem(f"Longer than maximum length {self.hi}.")
        return out


def record(fields):
    """A nested object with exactly ``fields`` (name -> check); a missing field is not checked."""
    def check(value):
        if not isinstance(value, dict):
            raise Problem({"_schema": ["Invalid input type."]})
        out, errors = {}, {}
        for name, v in value.items():
            try:
                if name not in fields:
                    raise Problem(UNKNOWN)
                out[name] = fields[name](v)
            except Problem as exc:
                errors[name] = exc.messages
        if errors:
            raise Problem(errors)
        return out
    return check


MAX_APPROVAL_HORIZON_S = 100 * 365 * 86400


def expiry(value):
    """An approval's expires_at: an ISO 8601 timestamp (UTC when it names no zone) at most 100
    years from now: a date near year 9999 in a far-west offset is year 10000 in UTC, stored but
    never rendered back (web/schemas.py `_expiry` reads it the same way)."""
    if value is None:
        raise Problem(NULL)
    if not isinstance(value, str):
        raise Problem("Not a valid string.")
    try:
        ts = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise Problem("must be an ISO 8601 timestamp") from None
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=timezone.utc)
    if ts.timestamp() > time.time() + MAX_APPROVAL_HORIZON_S:
        raise Problem("must be at most 100 years from now")
    return value


SHA256_HEX = re.compile(r"[0-9a-f]{64}")
SHA256 = Pattern(r"[0-9a-f]{64}", "sha256 must be 64 hex digits")
DIGEST = Pattern(r"[0-9a-f]{64}")
INT32 = Number(int, INT32_MIN, INT32_MAX, strict=True)
KEY_TEXT = Text(1, 255)
N8N_ID = Pattern(r"[A-Za-z0-9_.:-]{1,64}", "must be 1-64 of A-Z a-z 0-9 _ . : -", nullable=True)
ARTIFACT = record({"role": KEY_TEXT, "uri": Text(1, 2048), "sha256": SHA256})
EXPECTED_ARTIFACT = record({"role": KEY_TEXT, "sha256": SHA256, "uri": Text(1, 2048)})


# Each body as its route reads it: field -> check, and the fields whose size is limited.
TOKEN_FIELD = {"fencing_token": FENCING_TOKEN}
BODIES = {
    "job": {"task_version": TASK_VERSION, "pipeline": PIPELINE, "phases": phases, "budgets": budgets,
            "session_id": SESSION_ID, "policy_hash": POLICY_HASH},
    "lease": {"owner": OWNER, "ttl_s": TTL_S, "takeover": boolean},
    "renew": {"owner": OWNER, **TOKEN_FIELD, "ttl_s": TTL_S},
    "release": {"owner": OWNER, **TOKEN_FIELD},
    "begin": {"job_id": JOB_ID, "action": ACTION, "payload": anything, **TOKEN_FIELD,
              "operation_key": OPERATION_KEY, "target": TARGET, "requires_approval": boolean},
    "confirm": {**TOKEN_FIELD, "remote_id": remote_id, "receipt": mapping, "cost": COST},
    "fail": {**TOKEN_FIELD, "retryable": boolean, "error": mapping},
    "unknown": {**TOKEN_FIELD, "error": mapping},
    "cancel": {"reason": REASON},
    # The calls beyond the step cycle (client/ledger.py builds these bodies; web/schemas.py and the
    # agents and approvals routes hold the same rules as marshmallow schemas).
    "version": {**TOKEN_FIELD, "task_version": Number(int, 1, INT32_MAX, strict=True, nullable=True)},
    "outcome": {**TOKEN_FIELD, "http_status": Number(int, 100, 599, nullable=True),
                "error_kind": OneOf(("timeout", "connection_reset", "connection_refused", "dns"), nullable=True),
                "remote_id": remote_id, "receipt": mapping, "error": mapping, "cost": COST},
    "lookup": {**TOKEN_FIELD, "attempt": Number(int, 1, INT32_MAX, strict=True),
               "result": OneOf(("found", "absent", "undecidable")), "remote_id": remote_id, "receipt": mapping,
               "evidence": mapping},
    "checkpoint": {**TOKEN_FIELD, "phase": PHASE, "task_version": TASK_VERSION, "artifacts": ListOf(ARTIFACT, 1000),
                   "remote": mapping, "next_allowed_actions": ListOf(KEY_TEXT, 1000),
                   "approval_status": Text(None, 64, nullable=True)},
    "wait": {"fencing_token": Number(int, 0, INT32_MAX, strict=True), "resume_url": Text(1, 2048),
             "execution_id": N8N_ID, "workflow_id": N8N_ID},
    "approve": {"content_digest": DIGEST, "expires_in_s": Number(int, 60, 90 * 86400, strict=False, nullable=True),
                "note": Text(None, 2000, nullable=True)},
    "deny": {"content_digest": DIGEST, "reason": Text(1, 2000)},
    "grant": {"job_id": JOB_ID, "task_version": TASK_VERSION, "action": ACTION, "content_digest": DIGEST,
              "target": Text(grammar=_identifier(255)), "expires_at": expiry, "note": Text(None, 2000, nullable=True)},
    "bind": {"session_id": KEY_TEXT},
    "sync": {"fencing_token": Number(int, INT32_MIN, INT32_MAX, strict=True, nullable=True),
             "answer_actions": boolean, "rebuild_stream": boolean,
             "expected_artifacts": ListOf(EXPECTED_ARTIFACT, 1000)},
}
BODIES["batch_confirm"] = {"operation_key": Text(grammar=_identifier(512)), **BODIES["confirm"],
                           "remote_id": required_remote_id}
BODIES["batch"] = {"confirm": ListOf(record(BODIES["batch_confirm"]), 100),
                   "begin": ListOf(record(BODIES["begin"]), 100)}
SIZED = {"receipt", "error", "evidence"}  # at most max_receipt_bytes of canonical JSON each


def encode(body):
    """A body as HttpLedger sends it; what LocalLedger measures. A value JSON cannot hold (a set,
    bytes, an object) is the caller's bad value on both transports."""
    try:
        return json.dumps(body).encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise InvalidValue(f"a value is not JSON ({type(exc).__name__}: {str(exc)[:200]})", {}) from None


def body(kind, value, max_body_bytes, max_receipt_bytes):
    """``value`` (a dict with every field of ``kind``) checked in HTTP's order; normalised."""
    size = len(encode(value))
    if size > max_body_bytes:
        raise PayloadTooLarge(f"the request body is larger than {max_body_bytes} bytes", {"max_bytes": max_body_bytes})
    values(value, "$", 0)
    _counts(kind, value)
    out, errors = {}, {}
    for name, check in BODIES[kind].items():
        if name not in value:
            continue
        try:
            out[name] = check(value[name])
        except Problem as exc:
            errors[name] = exc.messages
    if errors:
        raise ValidationFailed("request validation failed", {"fields": errors})
    for name in SIZED & set(out):
        sized(name, out[name], max_receipt_bytes)
    return out


def _counts(kind, value):
    """A list's item limit on the raw body, before any item is checked (web/refusals.py check_counts)."""
    for name, check in BODIES[kind].items():
        items = value.get(name)
        if isinstance(check, ListOf) and isinstance(items, list) and len(items) > check.hi:
            raise ValidationFailed(f"{name} has {len(items)} items; at most {check.hi} are taken",
                                   {"fields": {name: [f"at most {check.hi} items"]}, "max_items": check.hi})


def sized(field, value, limit):
    """A receipt, an error or a checkpoint: at most ``limit`` bytes of canonical JSON."""
    if value is not None and len(canonical_json(value)) > limit:
        raise ValidationFailed(f"{field} is larger than {limit} bytes of JSON",
                               {"fields": {field: [f"at most {limit} bytes of JSON"]}, "max_bytes": limit})


def refuse(field, problem):
    raise ValidationFailed("request validation failed", {"fields": {field: [problem]}})


def identifier(field, value, max_len=255, slashes=True, optional=False):
    """A path parameter the client puts in a URL (job id, operation key)."""
    if optional and value is None:
        return
    problem = id_problem(value, max_len, slashes)
    if problem:
        refuse(field, problem)


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
            out[name] = BUDGETS[name].read(b[name])
        except Problem:
            raise StoredValueInvalid(f"job '{job.job_id}' has a {name} budget that is not a number; "
                                     "cancel it and start a new job", {"job_id": job.job_id, "field": f"budgets.{name}"}) from None
    return out
