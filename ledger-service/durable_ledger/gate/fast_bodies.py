"""Hand-written reads of the hot bodies (begin, confirm, outcome) for gate/fast_routes.py.

Each read accepts exactly the bodies web/schemas.py would load without a word of complaint and
returns what that schema returns for them (defaults filled in). Anything else, a bad value, an
unknown field or a body it is unsure of, gives None: the request then takes the Flask route,
whose schema refuses it with its own code, message and details. So the fast read never has to
spell a refusal, and a difference between the two can only send a valid body the slow way.
"""

import re

from ..kernel import checks, fields
from ..kernel.errors import LedgerError

_HASH = re.compile(r"[0-9a-f]{64}")
_ERROR_KINDS = ("timeout", "connection_reset", "connection_refused", "dns")


class _Refuse(Exception):
    """A value the schema might refuse: leave the request to it."""


def _checked(check, value):
    try:
        return check(value)
    except fields.Problem:
        raise _Refuse from None


def _token(body):
    value = body.get("fencing_token")
    if value is None:  # absent or null: the schema's "required" / "may not be null"
        raise _Refuse
    return _checked(fields.FENCING_TOKEN, value)


def _mapping(body, name):
    value = body.get(name, _ABSENT)
    return {} if value is _ABSENT else _checked(fields.mapping, value)


_ABSENT = object()
_BEGIN = {"job_id", "action", "payload", "request_hash", "fencing_token", "operation_key", "target",
          "requires_approval"}
_CONFIRM = {"fencing_token", "remote_id", "receipt", "cost"}
_OUTCOME = {"fencing_token", "http_status", "error_kind", "remote_id", "receipt", "error", "cost"}


def begin(body, _cfg):
    """BeginSchema's load of ``body``, or None."""
    try:
        if not body.keys() <= _BEGIN or "job_id" not in body or "action" not in body:
            return None
        out = {"job_id": _checked(fields.JOB_ID, body["job_id"]), "action": _checked(fields.ACTION, body["action"]),
               "fencing_token": _token(body),
               "operation_key": _checked(fields.OPERATION_KEY, body.get("operation_key")),
               "target": _checked(fields.TARGET, body.get("target")),
               "requires_approval": _checked(fields.boolean, body.get("requires_approval", False))}
        if "payload" in body:
            out["payload"] = body["payload"]
        if "request_hash" in body:
            value = body["request_hash"]
            if not isinstance(value, str) or not _HASH.fullmatch(value):
                return None
            out["request_hash"] = value
        return out
    except _Refuse:
        return None


def confirm(body, cfg):
    """ConfirmSchema's load of ``body`` (receipt within its size limit), or None."""
    try:
        if not body.keys() <= _CONFIRM or body.get("remote_id") is None:
            return None
        out = {"fencing_token": _token(body), "remote_id": _checked(fields.remote_id, body["remote_id"]),
               "receipt": _mapping(body, "receipt"), "cost": _checked(fields.COST, body.get("cost"))}
        return out if _sizes_fit(out, ("receipt",), cfg) else None
    except _Refuse:
        return None


def outcome(body, cfg):
    """OutcomeSchema's load of ``body`` (receipt and error within their size limit), or None."""
    try:
        if not body.keys() <= _OUTCOME:
            return None
        status, kind = body.get("http_status"), body.get("error_kind")
        if status is not None and (type(status) is not int or not 100 <= status <= 599):
            return None
        if kind is not None and kind not in _ERROR_KINDS:
            return None
        out = {"fencing_token": _token(body), "http_status": status, "error_kind": kind,
               "remote_id": _checked(fields.remote_id, body.get("remote_id")),
               "receipt": _mapping(body, "receipt"), "error": _mapping(body, "error"),
               "cost": _checked(fields.COST, body.get("cost"))}
        return out if _sizes_fit(out, ("receipt", "error"), cfg) else None
    except _Refuse:
        return None


_BATCH_CONFIRM = _CONFIRM | {"operation_key"}
MAX_BATCH_ITEMS = 100  # of each list, as BatchSchema


def batch(body, cfg):
    """BatchSchema's load of ``body`` (every item read as above), or None."""
    if not body.keys() <= {"confirm", "begin"}:
        return None
    confirms, begins = body.get("confirm", []), body.get("begin", [])
    if not (isinstance(confirms, list) and isinstance(begins, list)
            and len(confirms) <= MAX_BATCH_ITEMS and len(begins) <= MAX_BATCH_ITEMS):
        return None
    out = {"confirm": [_batch_confirm(item, cfg) for item in confirms],
           "begin": [begin(item, cfg) if isinstance(item, dict) else None for item in begins]}
    return None if None in out["confirm"] or None in out["begin"] else out


def _batch_confirm(item, cfg):
    if not isinstance(item, dict) or not item.keys() <= _BATCH_CONFIRM or item.get("operation_key") is None:
        return None
    try:
        key = _checked(fields.OPERATION_KEY, item["operation_key"])
    except _Refuse:
        return None
    out = confirm({k: v for k, v in item.items() if k != "operation_key"}, cfg)
    return None if out is None else {"operation_key": key, **out}


def _sizes_fit(out, names, cfg):
    try:
        for name in names:
            checks.sized(name, out[name], cfg.max_receipt_bytes)
    except LedgerError:
        return False
    return True
