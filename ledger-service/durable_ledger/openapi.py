"""OpenAPI 3 document built from the request bodies' declarations (kernel/bodies.py)."""

from functools import lru_cache

from apispec import APISpec
from apispec.ext.marshmallow import MarshmallowPlugin

from . import __version__
from .kernel import bodies

ERROR = {"$ref": "#/components/schemas/Error"}
JSON_OBJECT = {"type": "object"}
ERROR_STATUSES = {
    "400": "Malformed JSON (`malformed_json`: not JSON, not an object, nested deeper than 64 levels)",
    "401": "No or unknown bearer token (`unauthorized`)",
    "403": "The token's role or tenant may not do this (`forbidden`, `site_not_allowed`)",
    "404": "No such route or object (`not_found`, `job_not_found`, `operation_not_found`, ...)",
    "405": "Method not allowed on this path (`method_not_allowed`; the Allow header lists the methods)",
    "409": "Conflict with the stored state (`lease_held`, `stale_fencing_token`, `invalid_transition`, ...)",
    "413": "Body or artifact larger than the configured limit (`payload_too_large`, `artifact_quota_exceeded`)",
    "422": "Invalid values (`validation_error`, `invalid_value`, `digest_mismatch`, `secret_in_checkpoint`, ...)",
    "503": "The ledger's database cannot be used right now (`database_unavailable`): whether the call took effect "
           "is unknown; send it again (same key) once /health answers ok",
}
# Path parameters as the routes accept them (limits.id_problem is the full grammar).
PARAMS = {
    "job_id": {"type": "string", "minLength": 1, "maxLength": 255},
    "operation_key": {"type": "string", "minLength": 1, "maxLength": 512},
    "approval_id": {"type": "integer", "minimum": 1, "maximum": 2 ** 31 - 1},
    "sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
}


def _schema(name):
    """A request body's declaration by name (kernel/bodies.py)."""
    return bodies.declared()[name]


# (method, path, request schema or None, summary, roles[, query parameters])
ROUTES = [
    ("put", "/v1/jobs/{job_id}", "JobPut", "Create or get a job", "runner"),
    ("get", "/v1/jobs/{job_id}", None, "Read a job", "any"),
    ("post", "/v1/jobs/{job_id}/versions", "Version", "Start a higher task version (the next, or task_version)",
     "runner"),
    ("post", "/v1/jobs/{job_id}/lease", "Lease", "Acquire (or take over) the job's lease", "runner"),
    ("post", "/v1/jobs/{job_id}/start", "Start",
     "Start Job in one call: create or get the job, take the lease, start a higher task_version", "runner"),
    ("post", "/v1/jobs/{job_id}/lease/renew", "LeaseRenew", "Renew the lease", "runner"),
    ("delete", "/v1/jobs/{job_id}/lease", "LeaseRelease", "Release the lease", "runner"),
    ("get", "/v1/jobs/{job_id}/operations", None, "List the job's operations", "any", ["state"]),
    ("post", "/v1/jobs/{job_id}/checkpoints", "Checkpoint", "Save a checkpoint", "runner, approver"),
    ("get", "/v1/jobs/{job_id}/checkpoints", None, "Checkpoint history", "any"),
    ("post", "/v1/operations/begin", "Begin", "The gate: decide whether a side effect may be dispatched", "runner"),
    ("post", "/v1/operations/batch", "Batch", "Confirm finished steps and gate new ones in one round trip", "runner"),
    ("post", "/v1/operations/{operation_key}/confirm", "Confirm", "Record a receipt", "runner"),
    ("post", "/v1/operations/{operation_key}/fail", "Fail", "Record a definitive failure", "runner"),
    ("post", "/v1/operations/{operation_key}/unknown", "Unknown", "Record an unprovable outcome", "runner"),
    ("post", "/v1/operations/{operation_key}/outcome", "Outcome", "Record a raw outcome; the ledger classifies it", "runner"),
    ("post", "/v1/operations/{operation_key}/lookup-result", "LookupResult",
     "Report what the caller's own lookup found (found / absent / undecidable); answers like begin", "runner"),
    ("post", "/v1/operations/{operation_key}/reconcile", None, "Ask the remote now and apply its verdict",
     "runner, editor"),
    ("get", "/v1/operations/{operation_key}", None, "Read an operation and its events", "any"),
    ("post", "/v1/operations/{operation_key}/wait", "Wait",
     "Register an n8n execution's resume URL for an operation halted with approval_required", "runner"),
    ("get", "/v1/jobs/{job_id}/waits", None, "Executions waiting for an approval, and their resume deliveries", "any"),
    ("post", "/v1/jobs/{job_id}/cancel", "Cancel", "Cancel a job (never reopened)", "runner, editor, approver"),
    ("post", "/v1/jobs/{job_id}/reauthorize", "Reauthorize", "Lift an authorization or policy halt", "approver"),
    ("post", "/v1/jobs/{job_id}/resume", "Resume", "Take the lease, check stop conditions, get the recovery packet", "runner"),
    ("get", "/v1/jobs/{job_id}/report", None, "Job report: completed / failed / unknown / pending human", "any"),
    ("get", "/v1/reviews", None, "The review queue: UNKNOWN and NEEDS_REVIEW operations with evidence", "editor",
     ["job_id"]),
    ("get", "/v1/reviews/{operation_key}", None, "One review item with its events", "editor"),
    ("post", "/v1/reviews/{operation_key}/resolve", "Resolve", "Confirm (with remote_id), fail or abandon", "editor"),
    ("post", "/v1/approvals", "Approval", "Approve one version + action + content digest + target until expiry", "approver"),
    ("delete", "/v1/approvals/{approval_id}", None, "Revoke an approval", "approver"),
    ("get", "/v1/approvals/pending", None, "Operations the gate halted for an approval, with their decision",
     "approver"),
    ("post", "/v1/operations/{operation_key}/approve", "ApproveOperation",
     "Approve a halted operation, bound to the digest shown (409 content_changed)", "approver"),
    ("post", "/v1/operations/{operation_key}/deny", "DenyOperation",
     "Deny a halted operation with a reason (begin then answers approval_denied)", "approver"),
    ("get", "/v1/metrics/acceptance", None, "Tenant-wide acceptance counters", "any"),
    ("put", "/v1/jobs/{job_id}/session", "Bind", "Bind the job to an Agents API session", "runner"),
    ("get", "/v1/jobs/{job_id}/session", None, "The bound session and its turns", "any"),
    ("delete", "/v1/jobs/{job_id}/session", None, "Delete the remote session", "runner"),
    ("post", "/v1/jobs/{job_id}/session/sync", "Sync", "Sync the session's items and turns", "runner"),
    ("post", "/v1/jobs/{job_id}/session/follow-up", "FollowUp", "Send a follow-up message exactly once", "runner"),
    ("put", "/v1/artifacts", "<binary>", "Store an artifact (content-addressed)", "runner"),
    ("get", "/v1/artifacts/{sha256}", None, "Read an artifact", "any"),
    ("post", "/v1/webhooks/openai", "<webhook>", "OpenAI webhook (signed; no bearer token)", "none"),
    ("get", "/v1/whoami", None, "The token's tenant, role and the routes it may call; ?tenant= checks the tenant",
     "any", ["tenant"]),
    ("get", "/health", None, "Liveness and database check; echoes tenant and role with a token", "none"),
    ("get", "/metrics", None, "Prometheus metrics", "none"),
    ("get", "/openapi.json", None, "This document", "none"),
]


def _body(name):
    if name == "<binary>":
        return {"required": True, "content": {"application/octet-stream": {
            "schema": {"type": "string", "format": "binary"}}}}
    if name == "<webhook>":
        return {"required": True, "content": {"application/json": {"schema": JSON_OBJECT}}}
    cls = _schema(name)
    # A body whose fields are all optional may be left out (the routes read an empty body as {}).
    required = any(f.required for f in cls._declared_fields.values())
    return {"required": required, "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{name}"}}}}


def _responses(method, path):
    ok = "204" if (method, path) == ("delete", "/v1/jobs/{job_id}/lease") else "200"
    content = {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}} \
        if path == "/v1/artifacts/{sha256}" else \
        {"text/plain": {"schema": {"type": "string"}}} if path == "/metrics" else \
        {"application/json": {"schema": JSON_OBJECT}}
    out = {ok: {"description": "OK"} if ok == "204" else {"description": "OK", "content": content}}
    if method in ("put", "post") and path != "/v1/webhooks/openai":
        out["201"] = {"description": "Created", "content": {"application/json": {"schema": JSON_OBJECT}}}
    for status, text in ERROR_STATUSES.items():
        out[status] = {"description": text, "content": {"application/json": {"schema": ERROR}}}
    if path == "/health":
        out["503"] = {"description": "The database is unreachable (`database: unreachable`, with the error fields)",
                      "content": {"application/json": {"schema": JSON_OBJECT}}}
    return out


@lru_cache(maxsize=1)
def spec_dict():
    spec = APISpec(title="Durable Steps ledger", version=__version__, openapi_version="3.0.3",
                   plugins=[MarshmallowPlugin()])
    spec.components.security_scheme("bearer", {"type": "http", "scheme": "bearer"})
    spec.components.schema("Error", {"type": "object", "required": ["error"], "properties": {"error": {
        "type": "object", "required": ["code", "message", "details"],
        "properties": {"code": {"type": "string"}, "message": {"type": "string"}, "details": {"type": "object"}}}}})
    # Leaves first: a schema nested in another (Begin inside Batch) is registered by the
    # plugin under the same name when the outer one is added.
    names = {r[2] for r in ROUTES if r[2] and not r[2].startswith("<")}
    for name in sorted(names, key=lambda n: (n == "Batch", n)):
        if name not in spec.components.schemas:
            spec.components.schema(name, schema=_schema(name))
    paths = {}
    for method, path, body, summary, roles, *query in ROUTES:
        op = {"summary": summary, "description": f"Roles: {roles}.", "responses": _responses(method, path)}
        if roles != "none":
            op["security"] = [{"bearer": []}]
        if body:
            op["requestBody"] = _body(body)
        params = [p.strip("{}") for p in path.split("/") if p.startswith("{")]
        op["parameters"] = [{"name": p, "in": "path", "required": True, "schema": PARAMS[p]} for p in params]
        op["parameters"] += [{"name": q, "in": "query", "required": False, "schema": {"type": "string", "maxLength": 1024}}
                             for q in (query[0] if query else [])]
        if path == "/v1/artifacts":
            op["parameters"].append({"name": "X-Content-SHA256", "in": "header", "required": False,
                                     "schema": PARAMS["sha256"]})
        if not op["parameters"]:
            del op["parameters"]
        paths.setdefault(path, {})[method] = op
    for path, ops in paths.items():
        spec.path(path=path, operations=ops)
    out = spec.to_dict()
    # The gate digests `payload` itself or takes the caller's `request_hash`: one is required.
    out["components"]["schemas"]["Begin"]["anyOf"] = [{"required": ["payload"]}, {"required": ["request_hash"]}]
    return out
