"""Leases with fencing tokens (why: durable_ledger/kernel/fencing.py, which checks them).

Tokens only grow: takeover increments the row's token in a conditional UPDATE, release keeps it.

Liveness beside the TTL (issue 37). The TTL says how long the lease stands without renewal; it
cannot tell a holder that is still writing from one that crashed (n8n never releases, a killed
execution cannot), so a takeover either waited the whole TTL or fenced out a live writer. A
holder that beats says more: ``live_until`` is "I am working until then", pushed forward on every
heartbeat (`renew` with ``live_s``), as Temporal's activity heartbeats against a heartbeat timeout:

    holder A   start(live 10 s) | beat | beat | beat | confirm, beat(live 3 s) . . . . . (idle)
    caller B   start(takeover, if_live=wait): 409 holder_live ... 409 ...  | start: taken over
                                                                   A's live_until passed ^

A dead holder stops beating and is taken over at most ``live_s`` after its last beat; a live one
is never fenced out by a caller that respects liveness. ``live_until`` None (an API client, Start
Job before node 1.4): no liveness, taken over at once, as before.
"""

import logging
import time

from .. import store
from ..kernel.errors import HolderLive, LeaseHeld, LeaseLost, ValidationFailed
from ..kernel.n8n_context import stamp
from ..store import jobs as job_rows
from ..store.audit import record_refusal
from ..store.db import IntegrityError, InterfaceError, OperationalError, database_unavailable, write_txn
from .jobs import get_job
from .serialize import iso

log = logging.getLogger("durable_ledger")

MAX_TTL_S = 24 * 3600


def check_ttl(ttl_s):
    if ttl_s is None or not (1 <= ttl_s <= MAX_TTL_S):
        raise ValidationFailed(f"ttl_s must be between 1 and {MAX_TTL_S}", {"field": "ttl_s"})
    return ttl_s


def acquire_lease(tenant, job_id, owner, ttl_s, takeover=False, actor="system", now=None):
    """Returns (job, lease). Same owner + live lease: extend, same token."""
    ttl_s = check_ttl(ttl_s)
    job = get_job(tenant, job_id)
    for _ in range(5):
        now_ = time.time() if now is None else now
        lease = store.lease_of(job.id)
        if lease is None:
            try:
                with write_txn():
                    lease = job_rows.insert_lease(job.id, owner, now_ + ttl_s, now_)
                    job_rows.log_job_event(tenant, job.id, actor, "lease_acquired",
                                           {"owner": owner, "fencing_token": 1}, now_)
                return job, lease
            except IntegrityError:
                continue  # a concurrent first acquirer won; re-read and compete normally
        live = lease.expires_at > now_
        if live and lease.owner == owner:
            # Extended only if nobody expired it since it was read: a cancel's or a release's
            # expiry landing in between is not undone (the job would be cancelled with a live
            # lease); the loop then reads the lease expired and acquires it with the next token.
            # Not "expires_at > now" (the cancel's clock may be ahead of this one), and not "as
            # read" (the same holder's concurrent extends would then starve each other).
            n = job_rows.extend_lease(lease.id, lease.fencing_token, now_ + ttl_s, read_expiry=lease.expires_at)
            if n == 1:
                lease.expires_at = now_ + ttl_s
                return job, lease
            continue
        if live and not takeover:
            raise held_refusal(tenant, job, lease, owner, actor, now_)
        # Expired, or an explicit takeover: the conditional UPDATE on the old token makes
        # two concurrent takers race for one increment; the loser re-reads and sees a live lease.
        new_token = lease.fencing_token + 1
        with write_txn():
            n = job_rows.take_over_lease(lease.id, lease.fencing_token, owner, new_token, now_ + ttl_s, now_)
            if n == 1:
                job_rows.log_job_event(tenant, job.id, actor, "lease_taken_over" if live else "lease_acquired",
                                       {"owner": owner, "previous_owner": lease.owner, "fencing_token": new_token},
                                       now_)
        if n == 1:
            return job, job_rows.lease_by_pk(lease.id)
    raise LeaseHeld("lease is contended; retry", {})


def held_refusal(tenant, job, lease, owner, actor, now):
    """The refusal of a live lease held by another owner, recorded on the job's timeline. It names
    the way out (n8n's Start Job option Take Over, the API's ``takeover``) and the expiry as an ISO
    time; ``expires_at`` stays the epoch number earlier releases answered."""
    until = iso(lease.expires_at)
    exc = LeaseHeld(
        f"job '{job.job_id}' is leased by '{lease.owner}' until {until} ({max(0, round(lease.expires_at - now))} s "
        "from now); turn on Start Job's option Take Over (API: \"takeover\": true) to take it over (the holder "
        "is fenced out at its next ledger call), or wait until then",
        {"owner": lease.owner, "expires_at": lease.expires_at, "expires_at_iso": until,
         "fencing_token": lease.fencing_token, "option": "takeover"},
    )
    record_refusal(tenant, job.id, actor, exc.code, stamp({"owner": lease.owner, "requested_by": owner,
                                                           "expires_at": lease.expires_at, "reason": exc.message}))
    return exc


IF_LIVE_TAKE_OVER, IF_LIVE_WAIT = "take_over", "wait"
MAX_LIVE_S = 3600


def live_until(now, live_s):
    """The liveness a holder asks for (``live_s`` seconds from ``now``; 0: idle now), or None."""
    if live_s is None:
        return None
    if not (0 <= live_s <= MAX_LIVE_S):
        raise ValidationFailed(f"live_s must be between 0 and {MAX_LIVE_S}", {"field": "live_s"})
    return now + live_s


def holder_is_live(lease, now):
    """Is the lease's holder working now, by its own heartbeats (not by the TTL)?"""
    return lease.expires_at > now and lease.live_until is not None and lease.live_until > now


def live_refusal(job, lease, now):
    """409 holder_live: a takeover that respects liveness met a holder still working. The caller
    asks again after ``retry_after_s``; nothing is written (a wait, not a refusal: no timeline entry
    per poll)."""
    wait = max(0.0, lease.live_until - now)
    return HolderLive(
        f"job '{job.job_id}' is being worked on by '{lease.owner}' (its last heartbeat says it is working for "
        f"another {wait:.1f} s); wait for it to finish, then start again: its steps answer Done Before",
        {"owner": lease.owner, "fencing_token": lease.fencing_token, "live_until": lease.live_until,
         "live_until_iso": iso(lease.live_until), "retry_after_s": round(min(wait, 1.0), 3)},
    )


def renew_lease(tenant, job_id, owner, fencing_token, ttl_s, now=None, live_s=None):
    """Extend the holder's lease; with ``live_s`` also its liveness (a heartbeat; 0: idle now)."""
    ttl_s = check_ttl(ttl_s)
    job = get_job(tenant, job_id)
    now_ = time.time() if now is None else now
    # Only a lease that has not expired is renewed. A release or a cancel expires it now, and a
    # heartbeat already on its way when that happened (the node's last beat of a step, or its
    # handover beat) must not bring it back to life:
    #
    #   holder:  beat ....................... beat (in flight) ........ lands: lease_lost
    #   ledger:          cancel: expires now
    #   re-run:                                 Start Job: lease free, no wait for a "live" holder
    n = job_rows.set_held_lease_expiry(job.id, owner, fencing_token, now_ + ttl_s, live_until(now_, live_s),
                                       unexpired_at=now_)
    if n != 1:
        lease = store.lease_of(job.id)
        held = lease is not None and lease.owner == owner and lease.fencing_token == fencing_token
        raise LeaseLost(
            f"the lease expired at {iso(lease.expires_at)} (released, cancelled or not renewed in time); "
            "start the job again" if held else "lease was taken over or never held by this owner; acquire a new one",
            {"current_owner": lease.owner if lease else None, "current_token": lease.fencing_token if lease else None,
             "expired": held},
        )
    return job, store.lease_of(job.id)


def carried_heartbeat(tenant, job_id, owner, fencing_token, live_s, ttl_s):
    """A heartbeat carried by a begin or a confirm, after that call's own transaction: the same
    renew, but it never fails the call it rides on (a beat's failure changes nothing: the
    holder's next ledger call is fenced anyway). The answer tells the holder whether it landed."""
    try:
        _, lease = renew_lease(tenant, job_id, owner, fencing_token, ttl_s, live_s=live_s)
    except LeaseLost as lost:
        return {"held": False, "code": lost.code}
    except (OperationalError, InterfaceError) as exc:
        # The call's own transaction has committed (a dispatch is SENT): the caller must get its
        # answer, or it would not act on a dispatch the ledger recorded. Only the beat is lost.
        what = database_unavailable(exc)
        if what is None:
            raise
        log.warning("heartbeat of job %s not renewed: database unavailable (%s)", job_id, what)
        return {"held": False, "code": "database_unavailable"}
    return {"held": True, "live_until": iso(lease.live_until)}


def release_lease(tenant, job_id, owner, fencing_token, now=None):
    """Expire the lease now; the token high-water mark stays so old tokens remain stale."""
    job = get_job(tenant, job_id)
    now_ = time.time() if now is None else now
    n = job_rows.set_held_lease_expiry(job.id, owner, fencing_token, now_)
    if n != 1:
        raise LeaseLost("lease is not held by this owner with this token", {})
