"""Retention: prune terminal operations and their events after a window (default 30 days).

The deduplication window is the retention window: once an operation is pruned, the ledger
no longer knows its key, so a caller re-sending that exact key after the window would be
dispatched again. WordPress-side dedupe (the mu-plugin's claims table and the
_durable_operation_key meta) is not pruned, so WordPress writes stay idempotent beyond it.
Non-terminal operations (SENT, UNKNOWN, NEEDS_REVIEW, PREPARED, retryable FAILED) are never
pruned, whatever their age.
"""

import time

from ..store.operations import delete_operations_with_events, prunable_operation_ids

DEFAULT_WINDOW_S = 30 * 86400


def prune(older_than_s=DEFAULT_WINDOW_S, now=None, batch=1000):
    cutoff = (time.time() if now is None else now) - older_than_s
    removed_ops = removed_events = 0
    while True:
        ids = prunable_operation_ids(cutoff, batch)
        if not ids:
            break
        events, ops = delete_operations_with_events(ids)
        removed_events += events
        removed_ops += ops
    return {"operations": removed_ops, "events": removed_events, "cutoff": cutoff}
