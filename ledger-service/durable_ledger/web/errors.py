"""The JSON error answers both Flask apps (the ledger's API and the publishing proxy) give.

A leaf of its own, so that the proxy does not load the whole API package to get them.
"""

import json
import logging

from flask import g, jsonify, request

from ..kernel.errors import COUNTED_REFUSALS, InvalidValue, LedgerError, PayloadTooLarge
from ..store.audit import record_refusal
from ..store.db import DataError

log = logging.getLogger("durable_ledger")


# The answer to an unexpected exception: this app's 500 handler, the hot routes' (gate/fast_routes.py)
# and the read-ahead worker's lean lane (readahead_worker.py).
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

    @app.errorhandler(500)
    def _internal(_exc):
        return jsonify(INTERNAL_ERROR), 500
