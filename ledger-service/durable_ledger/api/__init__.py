"""The ledger's Flask application factory."""

import logging
import os

from flask import Flask

from ..auth import load_bootstrap_tokens
from ..config import Config
from ..db import bind_request_lifecycle, db, init_database
from ..models import create_schema

log = logging.getLogger("durable_ledger")


def create_app(config=None, init_schema=True):
    """Defaults, then the environment, then ``config`` (tests pass a Config)."""
    cfg = config or Config.from_env()
    logging.basicConfig(level=cfg.log_level, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    app = Flask(__name__)
    app.config["DURABLE"] = cfg
    app.json.sort_keys = False
    init_database(cfg.database_url)
    if init_schema:
        create_schema()
    if cfg.bootstrap_tokens:
        with db.connection_context():
            load_bootstrap_tokens(cfg.bootstrap_tokens)
    from ..reconcile.setup import configure as configure_reconcilers
    from . import review_page

    configure_reconcilers(cfg)
    with db.connection_context():
        app.secret_key = review_page.session_secret(cfg)
    app.session_interface = review_page.ReviewOnlySessions()
    app.config.update(SESSION_COOKIE_HTTPONLY=True, SESSION_COOKIE_SAMESITE="Strict",
                      SESSION_COOKIE_SECURE=os.environ.get("DURABLE_COOKIE_SECURE") == "1")

    bind_request_lifecycle(app)

    from . import agents, approvals, jobs, operations, review_page, reviews, service

    app.register_blueprint(service.bp)
    app.register_blueprint(jobs.bp)
    app.register_blueprint(operations.bp)
    app.register_blueprint(agents.bp)
    app.register_blueprint(approvals.bp)
    app.register_blueprint(reviews.bp)
    app.register_blueprint(review_page.bp)
    service.register_error_handlers(app)
    log.info("ledger app ready %s", cfg.redacted())
    return app
