"""The JSON error answers both Flask apps (the ledger's API and the publishing proxy) give.

A leaf of its own, so that the proxy does not load the whole API package to get them.
"""

import json
import logging
import time

from flask import g, jsonify, request

from ..kernel.errors import COUNTED_REFUSALS, DatabaseUnavailable, InvalidValue, LedgerError, PayloadTooLarge
from ..store.audit import record_refusal
from ..store.db import DataError, InterfaceError, OperationalError, database_unavailable

log = logging.getLogger("durable_ledger")


# The answer to an unexpected exception: this app's 500 handler and the hot routes' (gate/fast_routes.py).
INTERNAL_ERROR = {"error": {"code": "internal_error", "message": "internal error; see the service log", "details": {}}}
MAX_ERROR_BYTES = 16 * 1024  # an error answer's JSON; details past it are dropped, code and message kept


def bounded(answer):
    """The schemas list at most 50 field errors (api/schemas.cap_messages); this is the
    backstop for any other refusal whose details grow with the input."""
    if len(json.dumps(answer, default=str)) <= MAX_ERROR_BYTES:
        return answer
    error = answer["error"]
    return {"error": {"code": error["code"], "message": str(error["message"])[:1000],
                      "details": {"details_truncated": True}}}


# This process's last database failure, for /health: a full disk or a lock past the busy timeout
# fails writes while the health check's SELECT 1 still answers.
_last_unavailable = {}
RECENT_S = 300


def recent_database_error():
    """{"driver_error", "seconds_ago"} of this process's last database failure within RECENT_S, else None."""
    at = _last_unavailable.get("at")
    if at is None or time.time() - at > RECENT_S:
        return None
    return {"driver_error": _last_unavailable["driver_error"], "seconds_ago": round(time.time() - at, 1)}


def unavailable_answer(exc, method, path):
    """(503, the error answer) when ``exc`` is the database failing (store/db.py
    `database_unavailable`), else None. One line in the log names the request and the driver's
    error; the caller gets the code and the driver's class only (its text can quote SQL).

    The answer claims nothing: a write whose COMMIT went out before the link broke may have
    landed (the server committed, the answer was lost), so the step's row, read once the database
    is back, is the truth. A begin answered this way dispatched nothing the caller may act on."""
    what = database_unavailable(exc)
    if what is None:
        return None
    first_line = str(exc).strip().split("\n", 1)[0][:300]
    log.error("database unavailable on %s %s: %s: %s", method, path, what, first_line)
    _last_unavailable.update(driver_error=what, at=time.time())
    return 503, DatabaseUnavailable("the ledger's database cannot be used right now; whether this call took effect "
                                    "is unknown: send it again (same key) once GET /health answers ok",
                                    {"driver_error": what}).to_dict()


def register_error_handlers(app):
    @app.errorhandler(LedgerError)
    def _ledger_error(exc):
        if exc.code in COUNTED_REFUSALS and "principal" in g and not exc.recorded:
            record_refusal(g.principal.tenant, None, g.principal.actor, exc.code,
                           {"path": request.path, **{k: v for k, v in exc.details.items() if k != "fields"}})
        return jsonify(bounded(exc.to_dict())), exc.http_status

    @app.errorhandler(404)
    def _not_found(_exc):
        return jsonify({"error": {"code": "not_found", "message": f"no route {request.method} {request.path}",
                                  "details": {}}}), 404

    @app.errorhandler(405)
    def _method(exc):
        allowed = sorted(getattr(exc, "valid_methods", None) or [])
        resp = jsonify({"error": {"code": "method_not_allowed",
                                  "message": f"{request.method} is not allowed on {request.path}",
                                  "details": {"allowed": allowed}}})
        resp.headers["Allow"] = ", ".join(allowed)
        return resp, 405

    @app.errorhandler(413)
    def _too_large(_exc):
        limit = request.max_content_length
        return jsonify(PayloadTooLarge(f"the request body is larger than {limit} bytes",
                                       {"max_bytes": limit}).to_dict()), 413

    @app.errorhandler(DataError)
    def _data_error(exc):
        # The schemas and limits.parse_json keep bad values out; this is the backstop for one
        # they miss (a column limit nobody mirrored): the caller's value, so 422, never a 500.
        # The driver's message can quote the value, so only its class goes to the caller.
        log.warning("database refused a value on %s %s: %s", request.method, request.path, type(exc).__name__)
        return jsonify(InvalidValue("a value does not fit the database column it is stored in",
                                    {"driver_error": type(exc).__name__}).to_dict()), 422

    @app.errorhandler(OperationalError)
    @app.errorhandler(InterfaceError)
    def _database_error(exc):
        answer = unavailable_answer(exc, request.method, request.path)
        if answer is None:  # an OperationalError that is a bug (SQLite: no such table): a 500
            log.exception("Exception on %s [%s]", request.path, request.method)
            return jsonify(INTERNAL_ERROR), 500
        status, body = answer
        return jsonify(body), status

    @app.errorhandler(500)
    def _internal(_exc):
        return jsonify(INTERNAL_ERROR), 500
