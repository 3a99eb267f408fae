"""The audit log: human decisions, policy refusals, and the acceptance counters built on them.

Refusals are written on the refusal path only (never on the hot path of an accepted call),
so counting them costs nothing when nothing is refused.
"""

import time

from ..store.models import AuditLog

REFUSAL_PREFIX = "refused:"


def audit(tenant, job_pk, actor, action, detail=None):
    AuditLog.create(tenant=tenant, job=job_pk, actor=actor, action=action, detail=detail, created_at=time.time())


def record_refusal(tenant, job_pk, actor, code, detail=None):
    """Best effort: a refusal must be answered even if recording it fails."""
    try:
        audit(tenant, job_pk, actor, REFUSAL_PREFIX + code, detail)
    except Exception:  # noqa: BLE001 - the refusal itself is what matters
        pass
