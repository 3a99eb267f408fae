"""The inbox worker and the polling fallback.

For each pending webhook: take the job's lease, claim the row (conditional UPDATE pending ->
processing), re-read the session (the payload only says "look"), sync, answer required
actions through the gate, mark done. A worker that dies mid-row leaves it 'processing'; after
``claim_timeout_s`` another worker re-claims it. Re-processing is safe because every action
goes through the gate and every delivery carries an Idempotency-Key.

The polling fallback re-reads bound sessions of active jobs not synced for ``poll_interval_s``
(webhooks can be lost; the ledger must converge without them).
"""

import logging
import socket
import time

from ..auth import Principal
from ..jobs.leases import acquire_lease, release_lease
from ..kernel.errors import LeaseHeld, LedgerError
from ..store import sessions as session_store
from ..store import webhooks as webhook_store
from .actions import answer_required_actions
from .sync import full_sync

log = logging.getLogger("durable_ledger.agents.worker")


def default_owner():
    return f"agents-worker:{socket.gethostname()}"


def reconcile_session(client, binding, owner, lease_ttl_s=120):
    """Lease, re-read, sync, answer actions, release. Returns a result dict (or None if leased elsewhere)."""
    job = session_store.job_by_pk(binding.job_id)
    principal = Principal(binding.tenant, "runner", owner)
    try:
        _, lease = acquire_lease(binding.tenant, job.job_id, owner, lease_ttl_s, actor=principal.actor)
    except LeaseHeld:
        return None
    try:
        binding, session = full_sync(client, binding)
        actions = []
        if job.status == "active":
            actions = answer_required_actions(principal, client, binding, job.job_id, session, lease.fencing_token)
        return {"session_status": session.status, "item_count": binding.item_count, "actions": actions}
    finally:
        try:
            release_lease(binding.tenant, job.job_id, owner, lease.fencing_token)
        except LedgerError:
            pass  # taken over meanwhile: the new holder owns the job now


def process_inbox(client, owner=None, limit=50, claim_timeout_s=300):
    """Process pending webhooks once. Returns the number of rows completed."""
    owner = owner or default_owner()
    now = time.time()
    rows = webhook_store.claimable_webhooks(now, claim_timeout_s, limit)
    done = 0
    for row in rows:
        binding = session_store.binding_of_job(row.job_id)
        if binding is None or not webhook_store.claim_webhook(row.id, owner, claim_timeout_s, time.time()):
            continue
        try:
            result = reconcile_session(client, binding, owner)
        except LedgerError as exc:
            log.warning("webhook %s: %s", row.webhook_id, exc.message)
            webhook_store.release_webhook(row.id, error=exc.to_dict()["error"])
            continue
        if result is None:  # the job is leased by someone else: hand the row back for later
            webhook_store.release_webhook(row.id)
            continue
        webhook_store.finish_webhook(row.id, owner, result)
        done += 1
    return done


def poll_stale(client, owner=None, poll_interval_s=300, limit=50):
    """Polling fallback: sync sessions of active jobs with no sync for ``poll_interval_s``."""
    owner = owner or default_owner()
    cutoff = time.time() - poll_interval_s
    rows = session_store.stale_bindings_of_active_jobs(cutoff, limit)
    count = 0
    for binding in rows:
        try:
            if reconcile_session(client, binding, owner) is not None:
                count += 1
        except LedgerError as exc:
            log.warning("poll %s: %s", binding.session_id, exc.message)
    return count


def run_worker(client, owner=None, interval_s=2.0, poll_interval_s=300, once=False, stop=None):
    owner = owner or default_owner()
    while True:
        n = process_inbox(client, owner)
        p = poll_stale(client, owner, poll_interval_s)
        if once or (stop is not None and stop()):
            return n, p
        time.sleep(interval_s)
