"""The request bodies, checked once for both doors: which fields each body has (``BODIES``, from
kernel/fields.py's field checks), and `body`, which runs a whole request body through the order
HTTP applies:

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

from .digest import canonical_json
from .errors import InvalidValue, MalformedJson, PayloadTooLarge, StoredValueInvalid, ValidationFailed
from .fields import (
    ACTION,
    ARTIFACT,
    BUDGETS,
    COST,
    DIGEST,
    EXPECTED_ARTIFACT,
    FENCING_TOKEN,
    GATE_BUDGETS,
    JOB_ID,
    KEY_TEXT,
    N8N_ID,
    OPERATION_KEY,
    OWNER,
    PHASE,
    PIPELINE,
    POLICY_HASH,
    REASON,
    SESSION_ID,
    TARGET,
    TASK_VERSION,
    TTL_S,
    ListOf,
    Number,
    OneOf,
    Problem,
    Text,
    _identifier,
    anything,
    boolean,
    budgets,
    expiry,
    mapping,
    phases,
    record,
    remote_id,
    required_remote_id,
)
from .limits import BAD_TEXT, INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, LONG_DIGITS, MAX_DEPTH, id_problem

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
    encoded = encode(value)
    if len(encoded) > max_body_bytes:
        raise PayloadTooLarge(f"the request body is larger than {max_body_bytes} bytes", {"max_bytes": max_body_bytes})
    if may_hold_bad_values(encoded):
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
            out[name] = BUDGETS[name].read(b[name])
        except Problem:
            raise StoredValueInvalid(f"job '{job.job_id}' has a {name} budget that is not a number; "
                                     "cancel it and start a new job", {"job_id": job.job_id, "field": f"budgets.{name}"}) from None
    return out
