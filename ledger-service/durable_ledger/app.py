"""The ledger's Flask application factory."""

import logging
import os

from flask import Flask, request

from . import service
from .agents import routes as agents
from .approvals import routes as approvals
from .approvals import wait_routes as waits
from .auth import load_bootstrap_tokens
from .console import base as console_base
from .console import links as console_links  # noqa: F401 - its views (approval request links) are on the console's bp
from .console import review_page
from .console import views as console
from .gate import fast_routes
from .gate import routes as operations
from .jobs import routes as jobs
from .kernel import limits, logsetup, n8n_context
from .kernel.config import Config
from .kernel.errors import UnsupportedMediaType
from .reconciliation import routes as reviews
from .reconciliation.setup import configure as configure_reconcilers
from .store.db import bind_request_lifecycle, db, init_database
from .store.migrations import create_schema
from .web import tracing
from .web.errors import register_error_handlers
from .web.jsonout import StrictJSONProvider

log = logging.getLogger("durable_ledger")


def create_app(config=None, init_schema=True):
    """Defaults, then the environment, then ``config`` (tests pass a Config)."""
    cfg = config or Config.from_env()
    _configure_logging(cfg)
    app = Flask(__name__)
    app.json = StrictJSONProvider(app)
    app.config["DURABLE"] = cfg
    app.config["MAX_CONTENT_LENGTH"] = cfg.max_body_bytes
    app.json.sort_keys = False
    if tracing.enabled():  # OTEL_* variables set (docs/operations.md#tracing); off: nothing imported
        tracing.setup(app, "durable-ledger")
    # A percent-encoded slash arrives decoded: /v1/operations/%2Fvictim/confirm is the path
    # /v1/operations//victim/confirm. With slash merging on, Werkzeug answers 308 to
    # /v1/operations/victim/confirm and a client that follows redirects (n8n does) confirms
    # another operation. Routing never rewrites a path: it matches as sent, or 404.
    app.url_map.merge_slashes = False
    app.url_map.strict_slashes = False
    _prepare_database(cfg, init_schema)
    configure_reconcilers(cfg)
    _configure_console_sessions(app, cfg)
    _install_request_lifecycle(app)
    _register_blueprints(app)
    register_error_handlers(app)
    fast_routes.install(app)  # begin, batch, confirm and outcome without Flask when the request is plain
    log.info("ledger app ready %s", cfg.redacted())
    return app


def _configure_logging(cfg):
    logsetup.configure(cfg.log_level)  # peewee and urllib3 kept quieter than DEBUG, records redacted


def _prepare_database(cfg, init_schema):
    """Bind the database, migrate it (unless the caller did: `serve` does it once in the master)
    and load DURABLE_BOOTSTRAP_TOKENS."""
    init_database(cfg.database_url)
    if init_schema:
        create_schema()
    if cfg.bootstrap_tokens:
        with db.connection_context():
            load_bootstrap_tokens(cfg.bootstrap_tokens)


def _configure_console_sessions(app, cfg):
    """The console's signed session cookie; only console paths open a session (console.py)."""
    with db.connection_context():
        app.secret_key = console.session_secret(cfg)
    app.session_interface = console.ConsoleSessions()
    console_base.install_csrf(app)
    app.config.update(SESSION_COOKIE_HTTPONLY=True, SESSION_COOKIE_SAMESITE="Strict",
                      SESSION_COOKIE_SECURE=os.environ.get("DURABLE_COOKIE_SECURE") == "1")


def _install_request_lifecycle(app):
    """Per request: a database connection, the path and text limits, the n8n provenance."""
    bind_request_lifecycle(app)
    app.before_request(_require_json_body)  # first: check_request_text reads a form body
    app.url_value_preprocessor(lambda _endpoint, values: limits.check_path_args(values))
    app.before_request(lambda: limits.check_request_text(request))
    # Provenance for the job timeline: which n8n execution made this call (kernel/n8n_context.py).
    app.before_request(lambda: n8n_context.set_execution(request.headers.get("X-N8N-Execution-Id"),
                                                         request.headers.get("X-N8N-Workflow-Id")))


# The route under /v1/ whose body is not JSON: an artifact's bytes, stored as sent.
RAW_BODY_ENDPOINTS = {"agents.put_artifact"}


def _require_json_body():
    """A body sent to a JSON route is JSON (or says nothing of its type), else 415 before
    anything reads it: a form's fields would otherwise be skipped and the route would act on
    defaults (PUT /v1/jobs/x with a form body created a job from nothing)."""
    if not request.path.startswith("/v1/") or request.endpoint in RAW_BODY_ENDPOINTS:
        return
    if not (request.content_length or request.headers.get("Transfer-Encoding")):
        return
    mimetype = request.mimetype
    if mimetype and mimetype != "application/json" and not mimetype.endswith("+json"):
        raise UnsupportedMediaType(f"this route takes a JSON body (Content-Type: application/json), not {mimetype}",
                                   {"content_type": mimetype[:100]})


def _register_blueprints(app):
    for module in (service, jobs, operations, waits, approvals, reviews, console, review_page):
        app.register_blueprint(module.bp)
    agents.install(app)
