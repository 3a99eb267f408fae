"""Executions waiting for an approval and the deliveries that resume them (approvals/waits.py
describes the protocol: one delivery per wait, owned through a conditional UPDATE of its claim)."""

from peewee import JOIN, IntegrityError

from .db import db
from .models import Operation
from .wait_models import ApprovalDelivery, ApprovalWait

# A delivery's states: pending -> delivered | failed.
PENDING, DELIVERED, FAILED = "pending", "delivered", "failed"


# ---------------------------------------------------------------------- waits

def insert_wait(tenant, op, key, resume_url, open_key, fencing_token, execution_id, workflow_id, registered_by,
                now):
    """(wait, created). Claim by INSERT: the unique (tenant, key, open_key) index answers a
    repeated registration with the row already there."""
    try:
        with db.atomic():
            return ApprovalWait.create(
                tenant=tenant, operation=op.id, job=op.job_id, operation_key=key, resume_url=resume_url,
                open_key=open_key, execution_id=execution_id, workflow_id=workflow_id, fencing_token=fencing_token,
                registered_by=registered_by, registered_at=now), True
    except IntegrityError:
        return ApprovalWait.get(ApprovalWait.tenant == tenant, ApprovalWait.operation_key == key,
                                ApprovalWait.open_key == open_key), False


def answered_before(wait, decision):
    """Whether another wait of the same operation and resume URL got a delivery of ``decision``."""
    return (ApprovalWait.select(ApprovalWait.id).join(ApprovalDelivery)
            .where(ApprovalWait.tenant == wait.tenant, ApprovalWait.operation_key == wait.operation_key,
                   ApprovalWait.resume_url == wait.resume_url, ApprovalWait.id != wait.id,
                   ApprovalDelivery.decision == decision).exists())


def open_waits_without_delivery(tenant, operation_key):
    """The operation's open waits that have no delivery yet (a list)."""
    return list(ApprovalWait.select().join(ApprovalDelivery, JOIN.LEFT_OUTER)
                .where(ApprovalWait.tenant == tenant, ApprovalWait.operation_key == operation_key,
                       ApprovalWait.open_key.is_null(False), ApprovalDelivery.id.is_null()))


def orphan_waits(limit):
    """Open waits of any tenant without a delivery, their operation joined, oldest first (a list)."""
    return list(ApprovalWait.select(ApprovalWait, Operation).join(Operation)
                .switch(ApprovalWait).join(ApprovalDelivery, JOIN.LEFT_OUTER)
                .where(ApprovalWait.open_key.is_null(False), ApprovalDelivery.id.is_null())
                .order_by(ApprovalWait.id).limit(limit))


def close_wait(wait_pk):
    """The wait is answered: its open key goes, so the same execution may wait again."""
    ApprovalWait.update(open_key=None).where(ApprovalWait.id == wait_pk).execute()


def waits_of_job(tenant, job_pk):
    """[(wait, delivery or None)] of the job, oldest first."""
    rows = (ApprovalWait.select(ApprovalWait, ApprovalDelivery).join(ApprovalDelivery, JOIN.LEFT_OUTER)
            .where(ApprovalWait.tenant == tenant, ApprovalWait.job == job_pk).order_by(ApprovalWait.id))
    out = []
    for w in rows:
        d = getattr(w, "approvaldelivery", None)
        out.append((w, d if d is not None and d.id is not None else None))
    return out


# ---------------------------------------------------------------------- deliveries

def delivery_of(wait_pk):
    """The wait's delivery, or None."""
    return ApprovalDelivery.get_or_none(ApprovalDelivery.wait == wait_pk)


def scheduled_delivery(wait_pk):
    """The wait's delivery (raises DoesNotExist if none)."""
    return ApprovalDelivery.get(ApprovalDelivery.wait == wait_pk)


def schedule_delivery(wait, decision, reason, now):
    """A pending delivery of ``decision`` for the wait, due now; nothing if it has one already
    (UNIQUE wait_id, ON CONFLICT DO NOTHING)."""
    ApprovalDelivery.insert(
        wait=wait.id, tenant=wait.tenant, operation_key=wait.operation_key, decision=decision,
        reason=(reason or None) and str(reason)[:2000], state=PENDING, attempts=0, next_attempt_at=now,
        created_at=now).on_conflict_ignore().execute()


def claim_delivery(d, now, claimed_until):
    """Whether this caller took the delivery: still pending at the attempt count ``d`` was read
    with, due, and not claimed by another deliverer. It counts one more attempt."""
    n = (ApprovalDelivery.update(claimed_until=claimed_until, attempts=ApprovalDelivery.attempts + 1)
         .where(ApprovalDelivery.id == d.id, ApprovalDelivery.state == PENDING,
                ApprovalDelivery.attempts == d.attempts, ApprovalDelivery.next_attempt_at <= now,
                ApprovalDelivery.claimed_until.is_null() | (ApprovalDelivery.claimed_until <= now))
         .execute())
    return n == 1


def record_attempt(delivery_pk, attempt, fields):
    """Write ``fields`` if the delivery is still pending at ``attempt``; the row count."""
    return (ApprovalDelivery.update(**fields)
            .where(ApprovalDelivery.id == delivery_pk, ApprovalDelivery.attempts == attempt,
                   ApprovalDelivery.state == PENDING).execute())


def due_deliveries(now, limit):
    """Pending, due, unclaimed deliveries with their wait joined, the most overdue first (a list)."""
    return list(ApprovalDelivery.select(ApprovalDelivery, ApprovalWait).join(ApprovalWait)
                .where(ApprovalDelivery.state == PENDING, ApprovalDelivery.next_attempt_at <= now,
                       ApprovalDelivery.claimed_until.is_null() | (ApprovalDelivery.claimed_until <= now))
                .order_by(ApprovalDelivery.next_attempt_at).limit(limit))


# --- for approvals/waits.py

def operation_by_pk(op_pk):
    """The operation row (raises DoesNotExist if none)."""
    return Operation.get_by_id(op_pk)
