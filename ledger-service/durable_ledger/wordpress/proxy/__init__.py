"""The WordPress publishing proxy: a second Flask app in durable_ledger.

It holds the WordPress application passwords (n8n and agents never do), carries operation key,
job id and fencing token through to WordPress, reads every write back and answers the ledger
reconciler's lookups. Callers authenticate with ledger tokens; each token may be limited to a
set of site profiles. See docs/proxy.md.
"""
from __future__ import annotations

import logging
import os

from flask import Flask

from ...auth import authenticate as authenticate_token
from ...auth import load_bootstrap_tokens
from ...gate.dispatch_auth import authorize_write
from ...kernel.config import Config
from ...store.db import bind_request_lifecycle, db, init_database
from ...store.migrations import create_schema
from ...web import tracing
from ...web.errors import register_error_handlers
from .sites import SiteRegistry, load_sites
from .views import bp

log = logging.getLogger("durable_ledger.proxy")


def _ledger_authenticator(cfg: Config):
    """Tokens live in the ledger database; bind it (bootstrap tokens too) and use durable_ledger.auth."""
    init_database(cfg.database_url)
    create_schema()
    if cfg.bootstrap_tokens:
        with db.connection_context():
            load_bootstrap_tokens(cfg.bootstrap_tokens)
    return lambda raw: authenticate_token(raw, cfg.token_cache_ttl_s)


def create_proxy_app(config: dict | None = None) -> Flask:
    """Defaults, then the environment, then `config` overrides (tests).

    config keys: sites ({name: {url, user, app_password}} or SiteProfile), ledger (a Config),
    authenticate (callable raw_token -> Principal), authorize (callable like
    gate.dispatch_auth.authorize_write; raises to refuse), connect_timeout, read_timeout, max_media_bytes.
    """
    config = dict(config or {})
    env = os.environ
    ledger_cfg = config.get("ledger") or Config.from_env()
    sites = config["sites"] if "sites" in config else load_sites(env)
    app = Flask(__name__)
    app.json.sort_keys = False
    if tracing.enabled():  # OTEL_* variables set: request spans, WordPress calls as child spans
        tracing.setup(app, "durable-ledger-proxy")
    app.config["PROXY_SITES"] = SiteRegistry(
        sites,
        connect_timeout=float(config.get("connect_timeout", env.get("DURABLE_PROXY_CONNECT_TIMEOUT", 5))),
        read_timeout=float(config.get("read_timeout", env.get("DURABLE_PROXY_READ_TIMEOUT", 30))),
    )
    app.config["PROXY_MAX_MEDIA_BYTES"] = int(config.get("max_media_bytes",
                                                         env.get("DURABLE_PROXY_MAX_MEDIA_BYTES", 25 * 2**20)))
    app.config["PROXY_MEDIA_ALLOW_PRIVATE"] = config.get("media_allow_private",  # True or [networks]; tests/dev only
                                                         env.get("DURABLE_PROXY_MEDIA_ALLOW_PRIVATE", "0").strip() == "1")
    authenticate = config.get("authenticate")
    if authenticate is None:
        authenticate = _ledger_authenticator(ledger_cfg)

        bind_request_lifecycle(app)

    app.config["PROXY_AUTHENTICATE"] = authenticate
    app.config["PROXY_AUTHORIZE"] = config.get("authorize") or authorize_write

    app.register_blueprint(bp)
    register_error_handlers(app)
    log.info("publishing proxy ready; sites: %s", ", ".join(app.config["PROXY_SITES"].names()) or "(none)")
    return app
