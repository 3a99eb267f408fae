"""Durable Steps ledger: makes automation runs safe to resume (read state, reconcile, continue)."""

__version__ = "0.2.0"
