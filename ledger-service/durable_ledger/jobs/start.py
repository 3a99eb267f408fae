"""Start Job in one transaction: create or get the job, take its lease, start a higher version.

The same three steps as `PUT /v1/jobs/{id}`, `POST /v1/jobs/{id}/lease` and
`POST /v1/jobs/{id}/versions` (same refusals, same audit events), in one write transaction and
one round trip: Start Job is the first node of every durable workflow, and its three calls were
most of what it cost.

Why one transaction is safe where the three routes each needed their own retry: every path
through ``_start_txn`` writes the lease row (insert, extend or take over), so from that write to
the commit no other caller can change the lease (PostgreSQL holds the row lock; SQLite's
BEGIN IMMEDIATE holds the database), and the version is started under a token nobody can fence
out before it is committed:

    caller A: BEGIN | job row | lease row (token 5, locked) | version 1 -> 2 | COMMIT
    caller B: BEGIN | job row | lease row ........ waits ........ re-reads: held by A -> 409

A concurrent first creator of the job or of its lease row makes the INSERT fail; the whole
transaction is run again and finds the winner's row, as the routes' claim-by-INSERT does.
"""

import time

from .. import store
from ..kernel.errors import LeaseHeld, TaskVersionLower
from ..store import jobs as job_rows
from ..store.db import IntegrityError, write_txn
from .jobs import check_spec
from .leases import IF_LIVE_TAKE_OVER, check_ttl, held_refusal, holder_is_live, live_refusal, live_until

ATTEMPTS = 5
LOWER_REFUSE, LOWER_KEEP = "refuse", "keep"


class _Held(Exception):
    """A live lease of another owner, seen inside the transaction: refused after the rollback,
    so that the refusal's timeline entry is not rolled back with it."""

    def __init__(self, job, lease):
        super().__init__()
        self.job, self.lease = job, lease


class _Raced(Exception):
    """A conditional UPDATE lost to a concurrent writer: run the transaction again."""


class _Live(_Held):
    """A live holder (recent heartbeat) met by a takeover that waits for it: 409 holder_live."""


def start_job(tenant, job_id, owner, ttl_s, *, takeover=False, task_version=1, pipeline="generic",
              phases=None, budgets=None, policy_hash=None, if_lower=LOWER_REFUSE, actor="system",
              live_s=None, if_live=IF_LIVE_TAKE_OVER):
    """Returns (job, lease, created). ``task_version`` creates the job at that version; on an
    existing job a higher one is started under the new token, the current one changes nothing,
    and a lower one is refused (409 `task_version_lower`, before the lease is touched) unless
    ``if_lower`` is ``"keep"``: then the job goes on at its own version (Start Job 1 and 1.1).
    ``live_s``: the new holder is working for that long (then its heartbeats say so, leases.py);
    ``if_live="wait"``: a takeover of a holder that is still working is refused with 409
    `holder_live` (nothing written) instead of fencing it out."""
    ttl_s = check_ttl(ttl_s)
    spec = {"task_version": task_version, "pipeline": pipeline, "phases": phases,
            "budgets": budgets or {}, "policy_hash": policy_hash}
    liveness = {"live_s": live_s, "if_live": if_live}
    for _ in range(ATTEMPTS):
        now = time.time()
        try:
            with write_txn():
                return _start_txn(tenant, job_id, owner, ttl_s, takeover, spec, if_lower, actor, now, liveness)
        except (IntegrityError, _Raced):
            continue
        except _Live as held:
            raise live_refusal(held.job, held.lease, now) from None
        except _Held as held:
            raise held_refusal(tenant, held.job, held.lease, owner, actor, now) from None
    raise LeaseHeld("lease is contended; retry", {})


def _start_txn(tenant, job_id, owner, ttl_s, takeover, spec, if_lower, actor, now, liveness):
    job, created = _job_txn(tenant, job_id, spec, actor, now)
    asked = spec["task_version"]
    if asked < job.task_version and if_lower != LOWER_KEEP:
        raise TaskVersionLower(
            f"job '{job_id}' is at task version {job.task_version}; version {asked} cannot be started again "
            f"(versions only go up): set Task Version to {job.task_version} or higher, or use a new Job ID",
            {"field": "task_version", "given": asked, "current": job.task_version})
    lease = _lease_txn(tenant, job, owner, ttl_s, takeover, actor, now, liveness, created)
    if asked > job.task_version:
        job = _version_txn(tenant, job, asked, actor, now)
    return job, lease, created


def _job_txn(tenant, job_id, spec, actor, now):
    job = job_rows.find_job(tenant, job_id)
    if job is not None:
        return job, False
    check_spec(spec["pipeline"], spec["phases"], spec["budgets"])
    return job_rows.insert_job(tenant, job_id, spec, actor, now), True


def _lease_txn(tenant, job, owner, ttl_s, takeover, actor, now, liveness, created=False):
    """As `leases.acquire_lease`: same owner and live: extend, same token; another owner's live
    lease: refused unless ``takeover``; expired or taken over: the next token. With ``if_live``
    "wait", a holder still beating is not taken over (`_Live`): its liveness lapses within the
    ``live_s`` it asked for after its last heartbeat, then this takeover goes through."""
    alive = live_until(now, liveness["live_s"])
    lease = None if created else store.lease_of(job.id)  # a job inserted in this transaction has none
    if lease is None:
        lease = job_rows.insert_lease(job.id, owner, now + ttl_s, now, alive)
        job_rows.log_job_event(tenant, job.id, actor, "lease_acquired", {"owner": owner, "fencing_token": 1}, now)
        return lease
    live = lease.expires_at > now
    if live and lease.owner == owner:
        # Not if it was expired since it was read (a cancel's expiry stays): see leases.acquire_lease.
        _updated(job_rows.extend_lease(lease.id, lease.fencing_token, now + ttl_s, alive, read_expiry=lease.expires_at))
        lease.expires_at = now + ttl_s
        lease.live_until = alive if alive is not None else lease.live_until
        return lease
    if live and not takeover:
        raise _Held(job, lease)
    if liveness["if_live"] != IF_LIVE_TAKE_OVER and holder_is_live(lease, now):
        raise _Live(job, lease)
    new_token = lease.fencing_token + 1
    _updated(job_rows.take_over_lease(lease.id, lease.fencing_token, owner, new_token, now + ttl_s, now, alive))
    job_rows.log_job_event(tenant, job.id, actor, "lease_taken_over" if live else "lease_acquired",
                           {"owner": owner, "previous_owner": lease.owner, "fencing_token": new_token}, now)
    return job_rows.lease_by_pk(lease.id)


def _version_txn(tenant, job, target, actor, now):
    """As `jobs.bump_version` under the token this transaction holds (its lease row is written)."""
    _updated(job_rows.set_task_version(job.id, job.task_version, target, now))
    job_rows.log_job_event(tenant, job.id, actor, "version_bumped", {"from": job.task_version, "to": target}, now)
    return job_rows.job_by_pk(job.id)


def _updated(rows_changed):
    """A conditional UPDATE that changed no row lost to a concurrent writer."""
    if rows_changed != 1:
        raise _Raced()
