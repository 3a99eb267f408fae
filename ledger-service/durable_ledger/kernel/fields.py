"""What a field's value may be, once for both doors: the HTTP routes (web/schemas.py wraps each
check in a marshmallow field) and LocalLedger (through kernel/checks.py, which puts them together
into request bodies). Plain Python, no Flask and no marshmallow.

A field check takes the caller's value and returns it normalised, as the HTTP schema always
read it (an integer field given ``"5"`` or ``5.0`` gives 5), or raises `Problem` with
marshmallow's own messages. The named fields (``JOB_ID``, ``FENCING_TOKEN``, ``BUDGETS``...) are
the ledger's field rules, each defined here once.
"""

import math
import re
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Callable

from .limits import BAD_ID_CHARS, INT32_MAX, INT32_MIN, MAX_COST_PER_CALL, MAX_JOB_COST, id_problem

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
LIVE_S = Number(float, 0, 3600, nullable=True)  # a holder's liveness from now (jobs/leases.py)
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
