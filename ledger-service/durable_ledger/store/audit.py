"""The audit log: human decisions, policy refusals, and the acceptance counters built on them.

Refusals are written on the refusal path only (never on the hot path of an accepted call),
so counting them costs nothing when nothing is refused.
"""

import time

from .models import AuditLog, Job

REFUSAL_PREFIX = "refused:"


def audit(tenant, job_pk, actor, action, detail=None):
    AuditLog.create(tenant=tenant, job=job_pk, actor=actor, action=action, detail=detail, created_at=time.time())


def record_refusal(tenant, job_pk, actor, code, detail=None):
    """Best effort: a refusal must be answered even if recording it fails. True if recorded."""
    try:
        audit(tenant, job_pk, actor, REFUSAL_PREFIX + code, detail)
        return True
    except Exception:  # noqa: BLE001 - the refusal itself is what matters
        return False


def record_refused_call(tenant, job_id, actor, code, detail=None):
    """`record_refusal` for a call refused before its job row was at hand (a stale token, a
    digest mismatch): the job is looked up here, on the refusal path only. Best effort too."""
    try:
        job_pk = Job.select(Job.id).where(Job.tenant == tenant, Job.job_id == job_id).scalar()
    except Exception:  # noqa: BLE001
        return False
    return job_pk is not None and record_refusal(tenant, job_pk, actor, code, detail)
