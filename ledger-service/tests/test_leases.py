"""Leases: acquisition, takeover, renewal, release; tokens only grow."""

import pytest

from durable_ledger.jobs import jobs, leases
from durable_ledger.kernel.errors import JobNotFound, LeaseHeld, LeaseLost, ValidationFailed
from durable_ledger.store.models import AuditLog, Lease


@pytest.fixture
def job(conn):
    jobs.create_or_get_job("acme", "job-1")


def test_acquire_first_lease_gets_token_one(job):
    _, lease = leases.acquire_lease("acme", "job-1", "w1", 30, now=1000)
    assert (lease.owner, lease.fencing_token, lease.expires_at) == ("w1", 1, 1030)


def test_same_owner_reacquires_keeps_token_and_extends(job):
    leases.acquire_lease("acme", "job-1", "w1", 30, now=1000)
    _, lease = leases.acquire_lease("acme", "job-1", "w1", 30, now=1010)
    assert lease.fencing_token == 1 and lease.expires_at == 1040


def test_other_owner_refused_while_live(job):
    leases.acquire_lease("acme", "job-1", "w1", 30, now=1000)
    with pytest.raises(LeaseHeld) as exc:
        leases.acquire_lease("acme", "job-1", "w2", 30, now=1010)
    assert exc.value.details["owner"] == "w1"
    assert exc.value.http_status == 409


def test_expired_lease_taken_over_with_larger_token(job):
    leases.acquire_lease("acme", "job-1", "w1", 30, now=1000)
    _, lease = leases.acquire_lease("acme", "job-1", "w2", 30, now=1031)
    assert (lease.owner, lease.fencing_token) == ("w2", 2)
    assert AuditLog.select().where(AuditLog.action == "lease_acquired").count() == 2


def test_explicit_takeover_of_live_lease(job):
    leases.acquire_lease("acme", "job-1", "w1", 30, now=1000)
    _, lease = leases.acquire_lease("acme", "job-1", "w2", 30, takeover=True, now=1001)
    assert lease.fencing_token == 2
    assert AuditLog.select().where(AuditLog.action == "lease_taken_over").count() == 1


def test_renew_by_holder_and_refused_after_takeover(job):
    leases.acquire_lease("acme", "job-1", "w1", 30, now=1000)
    _, lease = leases.renew_lease("acme", "job-1", "w1", 1, 60, now=1020)
    assert lease.expires_at == 1080
    leases.acquire_lease("acme", "job-1", "w2", 30, takeover=True, now=1021)
    with pytest.raises(LeaseLost):
        leases.renew_lease("acme", "job-1", "w1", 1, 60, now=1022)


def test_renew_after_release_or_lapse_is_lease_lost_and_revives_nothing(job):
    # A heartbeat already on its way when the holder released (or the lease lapsed) must not
    # bring the lease back: a re-run's Start Job would wait for a "live" holder that has ended.
    leases.acquire_lease("acme", "job-1", "w1", 30, now=1000)
    leases.release_lease("acme", "job-1", "w1", 1, now=1001)
    with pytest.raises(LeaseLost) as exc:
        leases.renew_lease("acme", "job-1", "w1", 1, 60, now=1002, live_s=10)
    assert exc.value.details["expired"] is True and "expired" in str(exc.value)
    lease = Lease.get()
    assert lease.expires_at == 1001 and (lease.live_until or 0) <= 1002
    leases.acquire_lease("acme", "job-1", "w2", 30, now=1003)  # free at once: no live holder
    leases.acquire_lease("acme", "job-1", "w3", 30, takeover=True, now=1040)  # w2's lapsed at 1033
    with pytest.raises(LeaseLost) as exc:
        leases.renew_lease("acme", "job-1", "w2", 2, 60, now=1041)
    assert exc.value.details["expired"] is False


def test_release_keeps_high_water_mark(job):
    leases.acquire_lease("acme", "job-1", "w1", 30, now=1000)
    leases.release_lease("acme", "job-1", "w1", 1, now=1001)
    _, lease = leases.acquire_lease("acme", "job-1", "w2", 30, now=1002)
    assert lease.fencing_token == 2
    with pytest.raises(LeaseLost):
        leases.release_lease("acme", "job-1", "w1", 1)


def test_ttl_bounds_and_missing_job(conn):
    jobs.create_or_get_job("acme", "job-1")
    with pytest.raises(ValidationFailed):
        leases.acquire_lease("acme", "job-1", "w1", 0)
    with pytest.raises(JobNotFound):
        leases.acquire_lease("acme", "nope", "w1", 30)
    assert Lease.select().count() == 0


def test_same_owner_extend_does_not_revive_a_lease_expired_since_it_was_read(job):
    # acquire_lease / start read the lease live, then extend it: a cancel's or a release's expiry
    # landing in between must stay (found by the served stateful tests: a takeover racing a
    # cancel left the cancelled job with a live lease).
    from durable_ledger.store import jobs as job_rows

    _, lease = leases.acquire_lease("acme", "job-1", "w1", 30, now=1000)
    leases.release_lease("acme", "job-1", "w1", 1, now=1005)  # lands after the read at 1004
    assert job_rows.extend_lease(lease.id, 1, 1036, read_expiry=1030) == 0
    assert Lease.get().expires_at == 1005
    _, again = leases.acquire_lease("acme", "job-1", "w1", 30, now=1006)  # the same owner: the next token
    assert (again.fencing_token, again.expires_at) == (2, 1036)


def test_same_owner_extends_racing_each_other_both_succeed(job):
    # Another extend by the same holder only moves the expiry later: not a reason to retry (12
    # threads resuming as one owner ran out of retries when the condition was "as read").
    from durable_ledger.store import jobs as job_rows

    _, lease = leases.acquire_lease("acme", "job-1", "w1", 30, now=1000)
    assert job_rows.extend_lease(lease.id, 1, 1040, read_expiry=1030) == 1  # the other thread's
    assert job_rows.extend_lease(lease.id, 1, 1041, read_expiry=1030) == 1  # this one, read before
