"""Retention: prune terminal operations and their events after a window (default 30 days).

The deduplication window is the retention window: once an operation is pruned, the ledger
no longer knows its key, so a caller re-sending that exact key after the window would be
dispatched again. WordPress-side dedupe (the mu-plugin's claims table and the
_durable_operation_key meta) is not pruned, so WordPress writes stay idempotent beyond it.
Non-terminal operations (SENT, UNKNOWN, NEEDS_REVIEW, PREPARED, retryable FAILED) are never
pruned, whatever their age.
"""

import time

from ..kernel import states as S
from ..store.db import write_txn
from ..store.models import Operation, OperationEvent

DEFAULT_WINDOW_S = 30 * 86400


def prune(older_than_s=DEFAULT_WINDOW_S, now=None, batch=1000):
    cutoff = (time.time() if now is None else now) - older_than_s
    terminal = ((Operation.state.in_([S.CONFIRMED, S.ABANDONED]))
                | ((Operation.state == S.FAILED) & (Operation.retryable == False)))  # noqa: E712
    removed_ops = removed_events = 0
    while True:
        ids = [o.id for o in Operation.select(Operation.id).where(terminal, Operation.updated_at < cutoff).limit(batch)]
        if not ids:
            break
        with write_txn():
            removed_events += OperationEvent.delete().where(OperationEvent.operation.in_(ids)).execute()
            removed_ops += Operation.delete().where(Operation.id.in_(ids)).execute()
    return {"operations": removed_ops, "events": removed_events, "cutoff": cutoff}
