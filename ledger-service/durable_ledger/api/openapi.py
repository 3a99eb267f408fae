"""OpenAPI 3 document built from the marshmallow request schemas."""

from functools import lru_cache

from apispec import APISpec
from apispec.ext.marshmallow import MarshmallowPlugin

from .. import __version__
from . import schemas

ERROR = {"$ref": "#/components/schemas/Error"}

# (method, path, request schema or None, summary, roles)
ROUTES = [
    ("put", "/v1/jobs/{job_id}", "JobPut", "Create or get a job", "runner"),
    ("get", "/v1/jobs/{job_id}", None, "Read a job", "any"),
    ("post", "/v1/jobs/{job_id}/versions", "Token", "Bump the task version", "runner"),
    ("post", "/v1/jobs/{job_id}/lease", "Lease", "Acquire (or take over) the job's lease", "runner"),
    ("post", "/v1/jobs/{job_id}/lease/renew", "LeaseRenew", "Renew the lease", "runner"),
    ("delete", "/v1/jobs/{job_id}/lease", "LeaseRelease", "Release the lease", "runner"),
    ("get", "/v1/jobs/{job_id}/operations", None, "List the job's operations", "any"),
    ("post", "/v1/jobs/{job_id}/checkpoints", "Checkpoint", "Save a checkpoint", "runner, approver"),
    ("get", "/v1/jobs/{job_id}/checkpoints", None, "Checkpoint history", "any"),
    ("post", "/v1/operations/begin", "Begin", "The gate: decide whether a side effect may be dispatched", "runner"),
    ("post", "/v1/operations/batch", "Batch", "Confirm finished steps and gate new ones in one round trip", "runner"),
    ("post", "/v1/operations/{operation_key}/confirm", "Confirm", "Record a receipt", "runner"),
    ("post", "/v1/operations/{operation_key}/fail", "Fail", "Record a definitive failure", "runner"),
    ("post", "/v1/operations/{operation_key}/unknown", "Unknown", "Record an unprovable outcome", "runner"),
    ("post", "/v1/operations/{operation_key}/outcome", "Outcome", "Record a raw outcome; the ledger classifies it", "runner"),
    ("get", "/v1/operations/{operation_key}", None, "Read an operation and its events", "any"),
    ("post", "/v1/jobs/{job_id}/cancel", "Cancel", "Cancel a job (never reopened)", "runner, editor, approver"),
    ("post", "/v1/jobs/{job_id}/reauthorize", "Reauthorize", "Lift an authorization or policy halt", "approver"),
    ("post", "/v1/jobs/{job_id}/resume", "Resume", "Take the lease, check stop conditions, get the recovery packet", "runner"),
    ("get", "/v1/jobs/{job_id}/report", None, "Job report: completed / failed / unknown / pending human", "any"),
    ("post", "/v1/approvals", "Approval", "Approve one version + action + content digest + target until expiry", "approver"),
    ("delete", "/v1/approvals/{approval_id}", None, "Revoke an approval", "approver"),
    ("get", "/v1/metrics/acceptance", None, "Tenant-wide acceptance counters", "any"),
    ("get", "/health", None, "Liveness and database check; echoes tenant and role with a token", "none"),
    ("get", "/metrics", None, "Prometheus metrics", "none"),
]


@lru_cache(maxsize=1)
def spec_dict():
    spec = APISpec(title="Durable Steps ledger", version=__version__, openapi_version="3.0.3",
                   plugins=[MarshmallowPlugin()])
    spec.components.security_scheme("bearer", {"type": "http", "scheme": "bearer"})
    spec.components.schema("Error", {"type": "object", "properties": {"error": {
        "type": "object", "required": ["code", "message", "details"],
        "properties": {"code": {"type": "string"}, "message": {"type": "string"}, "details": {"type": "object"}}}}})
    # Leaves first: a schema nested in another (Begin inside Batch) is registered by the
    # plugin under the same name when the outer one is added.
    for name in sorted({r[2] for r in ROUTES if r[2]}, key=lambda n: n == "Batch"):
        if name not in spec.components.schemas:
            spec.components.schema(name, schema=getattr(schemas, f"{name}Schema"))
    paths = {}
    for method, path, body, summary, roles in ROUTES:
        op = {"summary": summary, "description": f"Roles: {roles}.",
              "responses": {"200": {"description": "OK"}, "default": {"description": "Error",
                            "content": {"application/json": {"schema": ERROR}}}}}
        if roles != "none":
            op["security"] = [{"bearer": []}]
        if body:
            op["requestBody"] = {"required": True, "content": {"application/json": {
                "schema": {"$ref": f"#/components/schemas/{body}"}}}}
        params = [p.strip("{}") for p in path.split("/") if p.startswith("{")]
        if params:
            op["parameters"] = [{"name": p, "in": "path", "required": True, "schema": {"type": "string"}}
                                for p in params]
        paths.setdefault(path, {})[method] = op
    for path, ops in paths.items():
        spec.path(path=path, operations=ops)
    return spec.to_dict()
