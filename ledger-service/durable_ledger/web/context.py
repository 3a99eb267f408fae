"""Per-request helpers: the authenticated principal and the app's config."""

from flask import current_app, g, request

from ..auth import authenticate, bearer_from_header


def principal():
    if "principal" not in g:
        raw = bearer_from_header(request.headers.get("Authorization"))
        g.principal = authenticate(raw, current_app.config["DURABLE"].token_cache_ttl_s)
    return g.principal


def config():
    return current_app.config["DURABLE"]
