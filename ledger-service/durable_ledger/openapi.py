"""OpenAPI 3 document generated from the route table (web/routing.py ROUTES: every route as
declared next to its view) and the request bodies' declarations (kernel/bodies.py)."""

from functools import lru_cache

from apispec import APISpec
from apispec.ext.marshmallow import MarshmallowPlugin

from . import __version__
from .agents import routes as _agents  # noqa: F401  (each routes module declares its routes on import)
from .approvals import routes as _approvals  # noqa: F401
from .approvals import wait_routes as _waits  # noqa: F401
from .gate import routes as _gate  # noqa: F401
from .jobs import routes as _jobs  # noqa: F401
from .reconciliation import routes as _reviews  # noqa: F401
from .web.routing import ROUTES

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


def _name(cls):
    return cls.__name__.removesuffix("Schema")


def _body(body):
    if body == "<binary>":
        return {"required": True, "content": {"application/octet-stream": {
            "schema": {"type": "string", "format": "binary"}}}}
    if body == "<webhook>":
        return {"required": True, "content": {"application/json": {"schema": JSON_OBJECT}}}
    name = _name(body)
    # A body whose fields are all optional may be left out (the routes read an empty body as {}).
    required = any(f.required for f in body._declared_fields.values())
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
    schemas = {_name(r.body): r.body for r in ROUTES if isinstance(r.body, type)}
    for name in sorted(schemas, key=lambda n: (n == "Batch", n)):
        if name not in spec.components.schemas:
            spec.components.schema(name, schema=schemas[name])
    paths = {}
    for route in ROUTES:
        method, path, body, query = route.method.lower(), route.path, route.body, route.query
        op = {"summary": route.summary, "description": f"Roles: {', '.join(route.roles)}.",
              "responses": _responses(method, path)}
        if route.roles != ("none",):
            op["security"] = [{"bearer": []}]
        if body:
            op["requestBody"] = _body(body)
        params = [p.strip("{}") for p in path.split("/") if p.startswith("{")]
        op["parameters"] = [{"name": p, "in": "path", "required": True, "schema": PARAMS[p]} for p in params]
        op["parameters"] += [{"name": q, "in": "query", "required": False, "schema": {"type": "string", "maxLength": 1024}}
                             for q in query]
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
