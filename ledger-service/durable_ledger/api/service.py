"""Health, metrics and the OpenAPI document."""

import logging
import time

from flask import Blueprint, Response, g, jsonify, request
from peewee import DataError

from .. import __version__, store
from ..auth import authenticate, bearer_from_header
from ..core import report
from ..core.audit import record_refusal
from ..errors import InvalidValue, LedgerError, PayloadTooLarge
from .context import config
from .openapi import spec_dict

log = logging.getLogger("durable_ledger")

bp = Blueprint("service", __name__)
# Refusals that the acceptance counters report (unauthorized side effects, bad checkpoints).
COUNTED_REFUSALS = {"stale_fencing_token", "forbidden", "site_not_allowed", "phase_skipped",
                    "precondition_failed", "secret_in_checkpoint", "unknown_phase", "digest_mismatch",
                    "write_not_dispatched", "fencing_token_not_issued"}
_started = time.time()


@bp.get("/health")
def health():
    body = {"status": "ok", "version": __version__, "uptime_s": round(time.time() - _started, 1)}
    try:
        store.ping()
        body["database"] = "ok"
    except Exception as exc:  # noqa: BLE001 - report any driver failure as unhealthy
        body.update(status="unavailable", database="error", error=type(exc).__name__)
        return jsonify(body), 503
    raw = bearer_from_header(request.headers.get("Authorization"))
    if raw is not None or request.headers.get("Authorization"):
        who = authenticate(raw, config().token_cache_ttl_s)  # 401 if the token is wrong
        body.update(tenant=who.tenant, role=who.role)
    return jsonify(body)


@bp.get("/metrics")
def metrics():
    counts = report.gauges()
    lines = ["# HELP durable_operations Operations in the ledger by state.", "# TYPE durable_operations gauge"]
    lines += [f'durable_operations{{state="{state}"}} {n}' for state, n in counts["operations"]]
    lines += ["# HELP durable_jobs Jobs by status.", "# TYPE durable_jobs gauge"]
    lines += [f'durable_jobs{{status="{status}"}} {n}' for status, n in counts["jobs"]]
    lines += ["# HELP durable_refusals_total Side effects and checkpoints the ledger refused, by code.",
              "# TYPE durable_refusals_total counter"]
    lines += [f'durable_refusals_total{{tenant="{t}",code="{code}"}} {n}' for t, code, n in counts["refusals"]]
    lines += ["# HELP durable_approval_resumes Resume calls of n8n executions waiting for an approval, by state.",
              "# TYPE durable_approval_resumes gauge"]
    lines += [f'durable_approval_resumes{{state="{state}"}} {n}' for state, n in counts["deliveries"]]
    return Response("\n".join(lines) + "\n", mimetype="text/plain; version=0.0.4")


@bp.get("/openapi.json")
def openapi():
    return jsonify(spec_dict())


def register_error_handlers(app):
    @app.errorhandler(LedgerError)
    def _ledger_error(exc):
        if exc.code in COUNTED_REFUSALS and "principal" in g:
            record_refusal(g.principal.tenant, None, g.principal.actor, exc.code,
                           {"path": request.path, **{k: v for k, v in exc.details.items() if k != "fields"}})
        return jsonify(exc.to_dict()), exc.http_status

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
        return jsonify({"error": {"code": "internal_error", "message": "internal error; see the service log",
                                  "details": {}}}), 500
