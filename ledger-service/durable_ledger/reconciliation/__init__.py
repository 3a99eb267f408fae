"""Reconciliation of SENT/UNKNOWN outcomes: ask the remote system by business key, or a human."""
