"""Jobs, their leases and checkpoints, and the job's audit-log entries: the statements of jobs/.

Every function runs in the caller's transaction (``with write_txn():`` where it writes more than
one row); the conditional updates return the number of rows they changed, so the caller can tell
a lost race from a win.
"""

from peewee import fn

from ..kernel import states as S
from .models import Approval, ApprovalDenial, AuditLog, Checkpoint, Job, Lease, Operation

# --- jobs


def find_job(tenant, job_id):
    """The tenant's job with this id, or None."""
    return Job.get_or_none(Job.tenant == tenant, Job.job_id == job_id)


def job_by_pk(job_pk):
    """The job row, read again (raises Job.DoesNotExist if it is gone)."""
    return Job.get_by_id(job_pk)


def insert_job(tenant, job_id, spec, actor, now):
    """The new job row (``spec``: task_version, pipeline, phases, budgets, policy_hash) and its
    job_created audit entry. Raises IntegrityError when the tenant already has this job."""
    job = Job.create(tenant=tenant, job_id=job_id, created_at=now, updated_at=now, **spec)
    log_job_event(tenant, job.id, actor, "job_created",
                  {"task_version": spec["task_version"], "pipeline": spec["pipeline"]}, now)
    return job


def job_task_version(job_pk):
    """The job's task version as stored now."""
    return Job.select(Job.task_version).where(Job.id == job_pk).scalar()


def set_task_version(job_pk, current, target, now):
    """Version ``current`` -> ``target``, conditional on ``current``: rows changed (0 or 1)."""
    return (Job.update(task_version=target, updated_at=now)
            .where(Job.id == job_pk, Job.task_version == current).execute())


def mark_job_cancelled(job_pk, now):
    """Cancel the job unless it is cancelled already: rows changed (0 or 1)."""
    return (Job.update(status="cancelled", halt_reason="cancelled", updated_at=now)
            .where(Job.id == job_pk, Job.status != "cancelled").execute())


def reactivate_halted_job(job_pk, now, policy_hash=None):
    """halted -> active (the halt reason cleared, ``policy_hash`` stored if given): rows changed."""
    fields = {"status": "active", "halt_reason": None, "updated_at": now}
    if policy_hash is not None:
        fields["policy_hash"] = policy_hash
    return Job.update(**fields).where(Job.id == job_pk, Job.status == "halted").execute()


def mark_job_halted(job_pk, reason, now):
    """The job halted with ``reason``, whatever its status."""
    return Job.update(status="halted", halt_reason=reason, updated_at=now).where(Job.id == job_pk).execute()


def set_job_phase(job_pk, phase, now):
    """The job's phase set to ``phase`` (None: not started), unconditionally."""
    return Job.update(phase=phase, updated_at=now).where(Job.id == job_pk).execute()


def count_resume_attempt(job_pk, now):
    """``resume_attempts + 1`` in one statement unless the job is cancelled: rows changed."""
    return (Job.update(resume_attempts=Job.resume_attempts + 1, updated_at=now)
            .where(Job.id == job_pk, Job.status != "cancelled").execute())


def advance_job_phase(job_pk, from_phase, phase, checkpoint, now):
    """The job's phase and checkpoint, conditional on its phase still being ``from_phase``
    (None: not started): rows changed (0 or 1)."""
    same_phase = (Job.phase == from_phase) if from_phase else Job.phase.is_null()
    return (Job.update(phase=phase, checkpoint=checkpoint, updated_at=now)
            .where(Job.id == job_pk, same_phase).execute())


def job_phases_of_tenant(tenant):
    """The distinct phases the tenant's jobs are in, sorted."""
    return [p for (p,) in Job.select(Job.phase).where(Job.tenant == tenant, Job.phase.is_null(False))
            .distinct().order_by(Job.phase).tuples()]


def page_of_jobs(tenant, page, page_size, status=None, phase=None, search=None, unknown_states=None,
                 awaiting_approval=False):
    """(jobs, total): one page of the tenant's jobs, most recently updated first, and how many
    match. ``unknown_states``: only jobs with an operation in one of them; ``awaiting_approval``:
    only jobs with a PREPARED operation that requires an approval."""
    q = Job.select().where(Job.tenant == tenant)
    if status:
        q = q.where(Job.status == status)
    if phase:
        q = q.where(Job.phase == phase)
    if search:
        q = q.where(fn.LOWER(Job.job_id).contains(search.lower()))
    if unknown_states:
        q = q.where(Job.id.in_(Operation.select(Operation.job).where(
            Operation.tenant == tenant, Operation.state.in_(unknown_states))))
    if awaiting_approval:
        q = q.where(Job.id.in_(Operation.select(Operation.job).where(
            Operation.tenant == tenant, Operation.state == S.PREPARED, Operation.requires_approval == True)))  # noqa: E712
    total = q.count()
    page = max(1, int(page))
    return list(q.order_by(Job.updated_at.desc(), Job.id.desc()).paginate(page, page_size)), total


def resume_attempts_of_tenant(tenant):
    """{job_id: resume_attempts} for the tenant's jobs resumed at least once."""
    return {j.job_id: j.resume_attempts for j in Job.select(Job.job_id, Job.resume_attempts)
            .where(Job.tenant == tenant, Job.resume_attempts > 0)}


# --- leases


def insert_lease(job_pk, owner, expires_at, now, live_until=None):
    """The job's first lease row, fencing token 1. Raises IntegrityError when the job has one."""
    return Lease.create(job=job_pk, owner=owner, fencing_token=1, expires_at=expires_at, acquired_at=now,
                        live_until=live_until)


def lease_by_pk(lease_pk):
    """The lease row, read again."""
    return Lease.get_by_id(lease_pk)


def extend_lease(lease_pk, token, expires_at, live_until=None, read_expiry=None):
    """The lease's expiry (and liveness, when given) moved, conditional on its token still being
    ``token`` (and, with ``read_expiry``, on its expiry not having been moved back since it was
    read: a release or a cancel sets it to their now, another extend of the same holder only
    later): rows changed."""
    fields = {Lease.expires_at: expires_at}
    if live_until is not None:
        fields[Lease.live_until] = live_until
    held = (Lease.id == lease_pk) & (Lease.fencing_token == token)
    if read_expiry is not None:
        held &= Lease.expires_at >= read_expiry
    return Lease.update(fields).where(held).execute()


def take_over_lease(lease_pk, token, owner, new_token, expires_at, now, live_until=None):
    """The lease given to ``owner`` with ``new_token``, conditional on its token still being
    ``token`` (two takers race for one increment): rows changed (0 or 1)."""
    return (Lease.update(owner=owner, fencing_token=new_token, expires_at=expires_at, acquired_at=now,
                         live_until=live_until)
            .where(Lease.id == lease_pk, Lease.fencing_token == token).execute())


def set_held_lease_expiry(job_pk, owner, token, expires_at, live_until=None, unexpired_at=None):
    """The expiry (and liveness, when given) of the job's lease if ``owner`` holds it with
    ``token`` (and, with ``unexpired_at``, it has not expired by then): rows changed (0 or 1)."""
    fields = {Lease.expires_at: expires_at}
    if live_until is not None:
        fields[Lease.live_until] = live_until
    held = (Lease.job == job_pk) & (Lease.owner == owner) & (Lease.fencing_token == token)
    if unexpired_at is not None:
        held &= Lease.expires_at > unexpired_at
    return Lease.update(fields).where(held).execute()


def expire_live_lease(job_pk, now):
    """The job's lease expired now if it is live (its token kept): rows changed."""
    return Lease.update(expires_at=now).where(Lease.job == job_pk, Lease.expires_at > now).execute()


# --- checkpoints


def append_checkpoint(job_pk, phase, task_version, body, token, actor, now):
    """The job's next checkpoint row (seq: the last one's + 1)."""
    seq = (Checkpoint.select(fn.COALESCE(fn.MAX(Checkpoint.seq), 0)).where(Checkpoint.job == job_pk).scalar()) + 1
    return Checkpoint.create(job=job_pk, seq=seq, phase=phase, task_version=task_version, body=body,
                             fencing_token=token, actor=actor, created_at=now)


def checkpoints_of_job(job_pk):
    """The job's checkpoints in seq order (a query: evaluated when iterated)."""
    return Checkpoint.select().where(Checkpoint.job == job_pk).order_by(Checkpoint.seq)


# --- the job's audit log


def log_job_event(tenant, job_pk, actor, action, detail, now):
    """An audit-log entry for the job, stamped ``now``."""
    return AuditLog.create(tenant=tenant, job=job_pk, actor=actor, action=action, detail=detail, created_at=now)


def audit_entries_of_job(job_pk):
    """The job's audit-log entries in the order written (a query: evaluated when iterated)."""
    return AuditLog.select().where(AuditLog.job == job_pk).order_by(AuditLog.id)


def refusal_counts_of_tenant(tenant, refusal_prefix):
    """(action, count) for the tenant's audit actions starting with ``refusal_prefix``."""
    return (AuditLog.select(AuditLog.action, fn.COUNT(AuditLog.id))
            .where(AuditLog.tenant == tenant, AuditLog.action.startswith(refusal_prefix))
            .group_by(AuditLog.action).tuples())


# --- for jobs/resume.py and jobs/report.py


def approvals_of_job(job_pk, by_id=False):
    """The job's approvals (a query), in id order with ``by_id``."""
    q = Approval.select().where(Approval.job == job_pk)
    return q.order_by(Approval.id) if by_id else q


# --- for jobs/timeline.py


def jobs_with_standing_denial(job_pks):
    """The jobs among ``job_pks`` with an unlifted approval denial of a still PREPARED operation."""
    return {r[0] for r in ApprovalDenial.select(ApprovalDenial.job).join(Operation).where(
        ApprovalDenial.job.in_(list(job_pks)), ApprovalDenial.lifted_at.is_null(),
        Operation.state == S.PREPARED).tuples()}
