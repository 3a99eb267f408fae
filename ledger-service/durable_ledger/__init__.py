"""Durable Steps ledger: makes automation runs safe to resume (read state, reconcile, continue)."""

__version__ = "0.1.0"
