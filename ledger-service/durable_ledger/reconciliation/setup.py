"""Registers the built-in reconcilers from configuration (once per process)."""

import json
import logging

from . import registry
from .generation import RegenerateReconciler
from .http_lookup import HttpLookupReconciler
from .wordpress import IdempotentUpdateReconciler, WordPressReconciler

log = logging.getLogger("durable_ledger.reconcile")


def configure(cfg):
    if cfg.proxy_url and cfg.proxy_token:
        wp = WordPressReconciler(cfg.proxy_url, cfg.proxy_token, cfg.proxy_default_site)
        registry.register("wordpress.create_draft", wp)
        registry.register("wordpress.upload_media", wp)
        registry.register("wordpress.publish", wp)
    for action in ("set_seo", "update_post", "add_resource_pack"):
        registry.register(f"wordpress.{action}", IdempotentUpdateReconciler())
    registry.register("openai.*", RegenerateReconciler())
    for kind, template in (json.loads(cfg.reconcile_http) if cfg.reconcile_http else {}).items():
        registry.register(kind, HttpLookupReconciler(template))
    log.info("reconcilers: %s", ", ".join(registry.kinds()) or "(none)")
