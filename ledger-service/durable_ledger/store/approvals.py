"""Approvals and approval denials (approvals/rules.py, approvals/decisions.py).

An approval is bound to job + task version + action + content digest + target; a denial to
operation + digest. See approvals/decisions.py for the decision protocol.
"""

from ..kernel import states as S
from .models import Approval, ApprovalDenial, AuditLog, Job, Operation, OperationEvent


def _binding(op):
    """The conditions of an unrevoked approval of what ``op`` would send."""
    return (Approval.job == op.job_id, Approval.task_version == op.task_version, Approval.action == op.action,
            Approval.content_digest == op.request_hash, Approval.target == (op.target or ""),
            Approval.revoked_at.is_null())


# ---------------------------------------------------------------------- approvals

def add_approval(tenant, job_pk, task_version, action, content_digest, target, policy_hash, expires_at,
                 approved_by, note, created_at, approver_name=None, approver_groups=None, door=None):
    """The new approval row."""
    return Approval.create(
        tenant=tenant, job=job_pk, task_version=task_version, action=action, content_digest=content_digest,
        target=target, policy_hash=policy_hash, expires_at=expires_at, approved_by=approved_by, note=note,
        created_at=created_at, approver_name=approver_name,
        approver_groups=",".join(sorted(approver_groups)) if approver_groups else None, door=door)


def approval_of_tenant(tenant, approval_pk):
    """The tenant's approval with this id, or None."""
    return Approval.get_or_none(Approval.id == approval_pk, Approval.tenant == tenant)


def get_approval(approval_pk):
    """The approval with this id (raises DoesNotExist if none)."""
    return Approval.get_by_id(approval_pk)


def revoke_approval(approval_pk, actor, now):
    """Mark the approval revoked at ``now`` by ``actor``; the row count."""
    return Approval.update(revoked_at=now, revoked_by=actor).where(Approval.id == approval_pk).execute()


def mark_approval_used(approval_pk, now):
    Approval.update(used_at=now).where(Approval.id == approval_pk).execute()


def live_approvals_of_job(job, action, digest, target, now):
    """Unrevoked, unexpired approvals of the job's current task version for this action, digest
    and target (None: no target), newest first; a lazy query, the caller stops at the one it takes."""
    q = (Approval.select().where(
        Approval.job == job.id, Approval.task_version == job.task_version, Approval.action == action,
        Approval.content_digest == digest, Approval.revoked_at.is_null(), Approval.expires_at > now)
        .order_by(Approval.id.desc()))
    if target is None:
        q = q.where(Approval.target.is_null(True) | (Approval.target == ""))
    else:
        q = q.where(Approval.target == target)
    return q


def live_approval_for(op, now):
    """The newest unrevoked approval of what ``op`` would send that has not expired, or None."""
    return Approval.select().where(*_binding(op), Approval.expires_at > now).order_by(Approval.id.desc()).first()


def live_approvals_for(op, now):
    """Every unrevoked, unexpired approval of what ``op`` would send, oldest first (a list)."""
    return list(Approval.select().where(*_binding(op), Approval.expires_at > now).order_by(Approval.id))


def approvals_for(op):
    """Every approval of what ``op`` would send, revoked and expired too, oldest first (a list)."""
    return list(Approval.select().where(
        Approval.job == op.job_id, Approval.task_version == op.task_version, Approval.action == op.action,
        Approval.content_digest == op.request_hash, Approval.target == (op.target or "")).order_by(Approval.id))


def denials_for(op):
    """Every denial of ``op``'s request digest, lifted too, oldest first (a list)."""
    return list(ApprovalDenial.select().where(ApprovalDenial.operation == op.id,
                                              ApprovalDenial.content_digest == op.request_hash)
                .order_by(ApprovalDenial.id))


def has_live_approval(op, now):
    """Whether an unrevoked, unexpired approval of what ``op`` would send exists."""
    return Approval.select().where(*_binding(op), Approval.expires_at > now).exists()


def latest_approval_for(op):
    """The newest unrevoked approval of what ``op`` would send, expired or used or not, or None."""
    return Approval.select().where(*_binding(op)).order_by(Approval.id.desc()).first()


def unused_approvals_for(op):
    """Unrevoked approvals of what ``op`` would send that no dispatch used yet (a lazy query)."""
    return Approval.select().where(*_binding(op), Approval.used_at.is_null())


# ---------------------------------------------------------------------- denials

def standing_denial(op_pk, digest):
    """The newest unlifted denial of this operation's ``digest``, or None."""
    return (ApprovalDenial.select()
            .where(ApprovalDenial.operation == op_pk, ApprovalDenial.content_digest == digest,
                   ApprovalDenial.lifted_at.is_null())
            .order_by(ApprovalDenial.id.desc()).first())


def add_denial(tenant, op, reason, denied_by, now, door=None):
    """The new denial row of ``op``'s request digest."""
    return ApprovalDenial.create(tenant=tenant, operation=op.id, job=op.job_id, content_digest=op.request_hash,
                                 reason=reason, denied_by=denied_by, created_at=now, door=door)


def lift_denials(op, actor, now):
    """Lift the standing denials of ``op``'s request digest; how many were lifted."""
    return (ApprovalDenial.update(lifted_at=now, lifted_by=actor)
            .where(ApprovalDenial.operation == op.id, ApprovalDenial.content_digest == op.request_hash,
                   ApprovalDenial.lifted_at.is_null()).execute())


# --- for approvals/decisions.py

def job_by_pk(job_pk):
    """The job row (raises DoesNotExist if none)."""
    return Job.get_by_id(job_pk)


def operations_waiting_for_approval(tenant, limit):
    """The tenant's PREPARED operations that require an approval, job joined, oldest first (a list)."""
    return list(Operation.select(Operation, Job).join(Job)
                .where(Operation.tenant == tenant, Operation.state == S.PREPARED,
                       Operation.requires_approval == True)
                .order_by(Operation.created_at).limit(limit))


def first_prepared_event(op_pk):
    """The operation's first event into PREPARED, or None."""
    return (OperationEvent.select().where(OperationEvent.operation == op_pk, OperationEvent.to_state == "PREPARED")
            .order_by(OperationEvent.id).first())


def recent_decisions(tenant, n):
    """The tenant's last ``n`` approval_granted/approval_denied audit rows, newest first (a list)."""
    return list(AuditLog.select().where(AuditLog.tenant == tenant,
                                        AuditLog.action.in_(("approval_granted", "approval_denied")))
                .order_by(AuditLog.id.desc()).limit(n))
