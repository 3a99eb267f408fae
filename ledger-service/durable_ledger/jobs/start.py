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

from peewee import IntegrityError

from .. import store
from ..kernel.errors import LeaseHeld, TaskVersionLower
from ..store.db import write_txn
from ..store.models import AuditLog, Job, Lease
from .jobs import check_spec
from .leases import check_ttl, held_refusal

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


def start_job(tenant, job_id, owner, ttl_s, *, takeover=False, task_version=1, pipeline="generic",
              phases=None, budgets=None, policy_hash=None, if_lower=LOWER_REFUSE, actor="system"):
    """Returns (job, lease, created). ``task_version`` creates the job at that version; on an
    existing job a higher one is started under the new token, the current one changes nothing,
    and a lower one is refused (409 `task_version_lower`, before the lease is touched) unless
    ``if_lower`` is ``"keep"``: then the job goes on at its own version (Start Job 1 and 1.1)."""
    ttl_s = check_ttl(ttl_s)
    spec = {"task_version": task_version, "pipeline": pipeline, "phases": phases,
            "budgets": budgets or {}, "policy_hash": policy_hash}
    for _ in range(ATTEMPTS):
        now = time.time()
        try:
            with write_txn():
                return _start_txn(tenant, job_id, owner, ttl_s, takeover, spec, if_lower, actor, now)
        except (IntegrityError, _Raced):
            continue
        except _Held as held:
            raise held_refusal(tenant, held.job, held.lease, owner, actor, now) from None
    raise LeaseHeld("lease is contended; retry", {})


def _start_txn(tenant, job_id, owner, ttl_s, takeover, spec, if_lower, actor, now):
    job, created = _job_txn(tenant, job_id, spec, actor, now)
    asked = spec["task_version"]
    if asked < job.task_version and if_lower != LOWER_KEEP:
        raise TaskVersionLower(
            f"job '{job_id}' is at task version {job.task_version}; version {asked} cannot be started again "
            f"(versions only go up): set Task Version to {job.task_version} or higher, or use a new Job ID",
            {"field": "task_version", "given": asked, "current": job.task_version})
    lease = _lease_txn(tenant, job, owner, ttl_s, takeover, actor, now)
    if asked > job.task_version:
        job = _version_txn(tenant, job, asked, actor, now)
    return job, lease, created


def _job_txn(tenant, job_id, spec, actor, now):
    job = Job.get_or_none(Job.tenant == tenant, Job.job_id == job_id)
    if job is not None:
        return job, False
    check_spec(spec["pipeline"], spec["phases"], spec["budgets"])
    job = Job.create(tenant=tenant, job_id=job_id, created_at=now, updated_at=now, **spec)
    AuditLog.create(tenant=tenant, job=job, actor=actor, action="job_created",
                    detail={"task_version": spec["task_version"], "pipeline": spec["pipeline"]}, created_at=now)
    return job, True


def _lease_txn(tenant, job, owner, ttl_s, takeover, actor, now):
    """As `leases.acquire_lease`: same owner and live: extend, same token; another owner's live
    lease: refused unless ``takeover``; expired or taken over: the next token."""
    lease = store.lease_of(job.id)
    if lease is None:
        lease = Lease.create(job=job.id, owner=owner, fencing_token=1, expires_at=now + ttl_s, acquired_at=now)
        AuditLog.create(tenant=tenant, job=job.id, actor=actor, action="lease_acquired",
                        detail={"owner": owner, "fencing_token": 1}, created_at=now)
        return lease
    live = lease.expires_at > now
    if live and lease.owner == owner:
        _updated(Lease.update(expires_at=now + ttl_s)
                 .where(Lease.id == lease.id, Lease.fencing_token == lease.fencing_token))
        lease.expires_at = now + ttl_s
        return lease
    if live and not takeover:
        raise _Held(job, lease)
    new_token = lease.fencing_token + 1
    _updated(Lease.update(owner=owner, fencing_token=new_token, expires_at=now + ttl_s, acquired_at=now)
             .where(Lease.id == lease.id, Lease.fencing_token == lease.fencing_token))
    AuditLog.create(tenant=tenant, job=job.id, actor=actor, action="lease_taken_over" if live else "lease_acquired",
                    detail={"owner": owner, "previous_owner": lease.owner, "fencing_token": new_token},
                    created_at=now)
    return Lease.get_by_id(lease.id)


def _version_txn(tenant, job, target, actor, now):
    """As `jobs.bump_version` under the token this transaction holds (its lease row is written)."""
    _updated(Job.update(task_version=target, updated_at=now)
             .where(Job.id == job.id, Job.task_version == job.task_version))
    AuditLog.create(tenant=tenant, job=job.id, actor=actor, action="version_bumped",
                    detail={"from": job.task_version, "to": target}, created_at=now)
    return Job.get_by_id(job.id)


def _updated(query):
    if query.execute() != 1:
        raise _Raced()
