"""Leases with fencing tokens.

A lease says who may act for a job *now*; the fencing token says who acted *last*. Expiry
alone cannot stop a paused worker (GC pause, n8n restart, stalled VM) from waking up and
writing after its lease was taken over:

    worker A: acquire (token 4) ... pause ..................... wake, write(token 4)
    worker B:                        lease expired, acquire (5), write(token 5)

so every write carries the token and the ledger (and WordPress, via the mu-plugin) refuse a
token lower than the highest one issued for the job. Tokens only grow: takeover increments
the row's token in a conditional UPDATE, release keeps it.
"""

import time

from peewee import IntegrityError

from ..db import write_txn
from ..errors import FencingTokenNotIssued, LeaseHeld, LeaseLost, StaleFencingToken, ValidationFailed
from ..models import AuditLog, Lease
from .jobs import get_job

MAX_TTL_S = 24 * 3600


def check_fence(lease, token):
    """Raise unless ``token`` is the job's current fencing token."""
    if lease is None:
        raise LeaseLost("the job has no lease: call Start Job / POST /v1/jobs/{id}/lease first", {})
    if token is None:
        raise ValidationFailed("fencing_token is required", {"field": "fencing_token"})
    if token < lease.fencing_token:
        raise StaleFencingToken(
            f"fencing token {token} is older than the job's current token {lease.fencing_token}: "
            "another worker took over this job",
            {"given": token, "current": lease.fencing_token},
        )
    if token > lease.fencing_token:
        raise FencingTokenNotIssued(
            f"fencing token {token} was never issued for this job (current {lease.fencing_token})",
            {"field": "fencing_token", "given": token, "current": lease.fencing_token},
        )


def _ttl(ttl_s):
    if ttl_s is None or not (1 <= ttl_s <= MAX_TTL_S):
        raise ValidationFailed(f"ttl_s must be between 1 and {MAX_TTL_S}", {"field": "ttl_s"})
    return ttl_s


def acquire_lease(tenant, job_id, owner, ttl_s, takeover=False, actor="system", now=None):
    """Returns (job, lease). Same owner + live lease: extend, same token."""
    ttl_s = _ttl(ttl_s)
    job = get_job(tenant, job_id)
    for _ in range(5):
        now_ = time.time() if now is None else now
        lease = Lease.get_or_none(Lease.job == job.id)
        if lease is None:
            try:
                with write_txn():
                    lease = Lease.create(job=job.id, owner=owner, fencing_token=1,
                                         expires_at=now_ + ttl_s, acquired_at=now_)
                    AuditLog.create(tenant=tenant, job=job.id, actor=actor, action="lease_acquired",
                                    detail={"owner": owner, "fencing_token": 1}, created_at=now_)
                return job, lease
            except IntegrityError:
                continue  # a concurrent first acquirer won; re-read and compete normally
        live = lease.expires_at > now_
        if live and lease.owner == owner:
            n = (Lease.update(expires_at=now_ + ttl_s)
                 .where(Lease.id == lease.id, Lease.fencing_token == lease.fencing_token).execute())
            if n == 1:
                lease.expires_at = now_ + ttl_s
                return job, lease
            continue
        if live and not takeover:
            raise LeaseHeld(
                f"job '{job_id}' is leased by '{lease.owner}' until its expiry; "
                "wait for it, or take over explicitly",
                {"owner": lease.owner, "expires_at": lease.expires_at, "fencing_token": lease.fencing_token},
            )
        # Expired, or an explicit takeover: the conditional UPDATE on the old token makes
        # two concurrent takers race for one increment; the loser re-reads and sees a live lease.
        new_token = lease.fencing_token + 1
        with write_txn():
            n = (Lease.update(owner=owner, fencing_token=new_token, expires_at=now_ + ttl_s, acquired_at=now_)
                 .where(Lease.id == lease.id, Lease.fencing_token == lease.fencing_token).execute())
            if n == 1:
                AuditLog.create(tenant=tenant, job=job.id, actor=actor,
                                action="lease_taken_over" if live else "lease_acquired",
                                detail={"owner": owner, "previous_owner": lease.owner, "fencing_token": new_token},
                                created_at=now_)
        if n == 1:
            return job, Lease.get_by_id(lease.id)
    raise LeaseHeld("lease is contended; retry", {})


def renew_lease(tenant, job_id, owner, fencing_token, ttl_s, now=None):
    ttl_s = _ttl(ttl_s)
    job = get_job(tenant, job_id)
    now_ = time.time() if now is None else now
    n = (Lease.update(expires_at=now_ + ttl_s)
         .where(Lease.job == job.id, Lease.owner == owner, Lease.fencing_token == fencing_token)
         .execute())
    if n != 1:
        lease = Lease.get_or_none(Lease.job == job.id)
        raise LeaseLost(
            "lease was taken over or never held by this owner; acquire a new one",
            {"current_owner": lease.owner if lease else None, "current_token": lease.fencing_token if lease else None},
        )
    return job, Lease.get(Lease.job == job.id)


def release_lease(tenant, job_id, owner, fencing_token, now=None):
    """Expire the lease now; the token high-water mark stays so old tokens remain stale."""
    job = get_job(tenant, job_id)
    now_ = time.time() if now is None else now
    n = (Lease.update(expires_at=now_)
         .where(Lease.job == job.id, Lease.owner == owner, Lease.fencing_token == fencing_token)
         .execute())
    if n != 1:
        raise LeaseLost("lease is not held by this owner with this token", {})
