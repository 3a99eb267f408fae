"""Health, metrics and the OpenAPI document."""

import logging
import time

from flask import Blueprint, Response, jsonify, request

from . import __version__, store
from .auth import authenticate, bearer_from_header
from .jobs import report
from .openapi import spec_dict
from .store.db import InterfaceError, OperationalError
from .web.context import config
from .web.routing import ROUTES, api
from .web.errors import INTERNAL_ERROR, recent_database_error, unavailable_answer

bp = Blueprint("service", __name__)
bp_log = logging.getLogger("durable_ledger")
_started = time.time()

# What a token of each role is for, in the words the n8n credential test and the CLI show.
ROLE_PURPOSE = {
    "runner": "runs workflows: starts jobs, takes their leases, begins steps, records outcomes, saves "
              "checkpoints (the n8n node and the Python client need this role)",
    "editor": "resolves the review queue and reconciles steps in the console; cannot run workflows",
    "approver": "approves and denies steps in the console; cannot run workflows",
    "admin": "may do everything a runner, an editor and an approver may",
}


def allowed_routes(role):
    """The API routes a role may call (public ones left out), from the route table."""
    return [f"{r.method} {r.path}" for r in ROUTES if r.allows(role)]


def _health_body():
    return {"status": "ok", "version": __version__, "uptime_s": round(time.time() - _started, 1)}


@api(bp, "GET", "/health", role="none", summary="Liveness and database check; echoes tenant and role with a token")
def health():
    """200 with ``database: ok`` after one round trip to the database; 503 while it cannot be
    used (see `_database_down`), and ok again as soon as it can: no restart in between."""
    body = _health_body()
    store.ping()  # a driver error goes to _database_down, as one opening the connection does
    body["database"] = "ok"
    recent = recent_database_error()
    if recent is not None:  # reachable now, but a call failed on it lately (a full disk, a lock)
        body["last_database_error"] = recent
    raw = bearer_from_header(request.headers.get("Authorization"))
    if raw is not None or request.headers.get("Authorization"):
        who = authenticate(raw, config().token_cache_ttl_s)  # 401 if the token is wrong
        body.update(tenant=who.tenant, role=who.role)
    return jsonify(body)


@bp.errorhandler(OperationalError)
@bp.errorhandler(InterfaceError)
def _database_down(exc):
    """The database failing on this blueprint's routes, also before the view ran (the request's
    connection could not be opened): the 503 error answer, and for /health its fields besides
    (``status: unavailable``, ``database: unreachable``), so that a probe reading either sees it."""
    answer = unavailable_answer(exc, request.method, request.path)
    if answer is None:  # a driver error that is a bug, not an outage
        bp_log.exception("Exception on %s [%s]", request.path, request.method)
        return jsonify(INTERNAL_ERROR), 500
    status, error = answer
    if request.endpoint == "service.health":
        return jsonify({**_health_body(), "status": "unavailable", "database": "unreachable", **error}), status
    return jsonify(error), status


@api(bp, "GET", "/v1/whoami", role="any", query=("tenant",),
     summary="The token's tenant, role and the routes it may call; ?tenant= checks the tenant")
def whoami(who):
    """Who this token is: tenant, role, what it may do; `?tenant=` checks the tenant too."""
    body = {
        "tenant": who.tenant,
        "role": who.role,
        "name": who.name,
        "sites": None if who.sites is None else sorted(who.sites),
        "runs_workflows": who.role in ("runner", "admin"),
        "may": ROLE_PURPOSE.get(who.role, ""),
        "actions": allowed_routes(who.role),
    }
    expected = request.args.get("tenant", "").strip()
    if expected:
        body["tenant_matches"] = expected == who.tenant
    return jsonify(body)


@api(bp, "GET", "/metrics", role="none", summary="Prometheus metrics")
def metrics():
    counts = report.gauges()
    lines = ["# HELP durable_operations Operations in the ledger by state.", "# TYPE durable_operations gauge"]
    lines += [f'durable_operations{{state="{state}"}} {n}' for state, n in counts["operations"]]
    lines += ["# HELP durable_jobs Jobs by status.", "# TYPE durable_jobs gauge"]
    lines += [f'durable_jobs{{status="{status}"}} {n}' for status, n in counts["jobs"]]
    lines += _refusal_lines(counts["refusals"], _metrics_tenant())
    lines += ["# HELP durable_approval_resumes Resume calls of n8n executions waiting for an approval, by state.",
              "# TYPE durable_approval_resumes gauge"]
    lines += [f'durable_approval_resumes{{state="{state}"}} {n}' for state, n in counts["deliveries"]]
    return Response("\n".join(lines) + "\n", mimetype="text/plain; version=0.0.4")


def _metrics_tenant():
    """The tenant whose refusals /metrics may name: an admin token's own. Without one (or with
    another role) only totals by code: an open /metrics must not list tenants. A wrong token is 401."""
    raw = bearer_from_header(request.headers.get("Authorization"))
    if raw is None and not request.headers.get("Authorization"):
        return None
    who = authenticate(raw, config().token_cache_ttl_s)
    return who.tenant if who.role == "admin" else None


def _refusal_lines(refusals, tenant):
    totals = {}
    for _t, code, n in refusals:
        totals[code] = totals.get(code, 0) + n
    lines = ["# HELP durable_refusals_total Side effects and checkpoints the ledger refused, by code"
             " (by tenant too, for the tenant of an admin token).", "# TYPE durable_refusals_total counter"]
    lines += [f'durable_refusals_total{{code="{code}"}} {n}' for code, n in sorted(totals.items())]
    lines += [f'durable_refusals_total{{tenant="{t}",code="{code}"}} {n}' for t, code, n in refusals if t == tenant]
    return lines


@api(bp, "GET", "/openapi.json", role="none", summary="This document")
def openapi():
    return jsonify(spec_dict())
