"""Resume: take the lease, check every stop condition, verify artifacts, hand back the packet.

The recovery packet is what a resumed worker (an n8n run, an agent's follow-up) is allowed to
know and do. It is built from the ledger's evidence, never from the worker's memory: confirmed
operations become "do not repeat", artifacts whose current digest differs from the checkpoint
send the job back to the phase that produced them.
"""

import time

from ..kernel import states as S
from ..kernel.errors import InvalidTransition
from ..kernel.phases import phases_for
from ..store import jobs as job_rows
from ..store.audit import audit
from ..store.operations import operations_of_job
from . import budgets
from .jobs import get_job
from .leases import acquire_lease
from .serialize import approval_dict, job_dict, lease_dict, operation_dict


def _producing_phase(job, role, sha):
    """The first checkpoint phase that recorded this artifact role (with its current sha)."""
    for cp in job_rows.checkpoints_of_job(job.id):
        for art in (cp.body or {}).get("artifacts") or []:
            if art.get("role") == role and (sha is None or art.get("sha256") == sha):
                return cp.phase
    return None


def _verify_artifacts(job, current):
    """Compare the caller's current digests with the last checkpoint's. Returns (list, rewind_phase)."""
    recorded = (job.checkpoint or {}).get("artifacts") or []
    given = {a["role"]: a.get("sha256") for a in current or []}
    order = phases_for(job)
    rewind = None
    out = []
    for art in recorded:
        role, sha = art.get("role"), art.get("sha256")
        if role not in given:
            out.append({**art, "verified": None, "status": "not_checked"})
            continue
        ok = given[role] == sha
        out.append({**art, "verified": ok, "status": "verified" if ok else "digest_mismatch",
                    "current_sha256": given[role]})
        if not ok:
            phase = _producing_phase(job, role, sha) or job.phase
            if order and phase in order:
                if rewind is None or order.index(phase) < order.index(rewind):
                    rewind = phase
    return out, rewind


def _summary(job, phase, ops, artifacts, halt):
    parts = [f"job {job.job_id} v{job.task_version}, phase {phase or 'not started'}"]
    done = [o for o in ops if o.state == S.CONFIRMED]
    for o in done:
        parts.append(f"{o.action} confirmed (remote id {o.remote_id}): do not repeat it")
    pending = [o for o in ops if o.state in S.NEEDS_ATTENTION]
    for o in pending:
        parts.append(f"{o.action} is {o.state}: reconcile before anything else")
    bad = [a["role"] for a in artifacts if a["verified"] is False]
    if bad:
        parts.append(f"artifacts changed ({', '.join(bad)}): rebuild them")
    if not any(o.action.endswith("publish") and o.state == S.CONFIRMED for o in ops):
        parts.append("do not publish without a live approval")
    if halt:
        parts.append(f"HALTED ({halt}): do nothing until a human acts")
    return "; ".join(parts)


def _cancelled(principal, job):
    audit(principal.tenant, job.id, principal.actor, "refused:resume_cancelled", {})
    return InvalidTransition("the job was cancelled; it is never reopened", {"status": "cancelled"})


def resume_job(principal, job_id, owner, ttl_s, takeover=False, artifacts=None, policy_hash=None):
    job = get_job(principal.tenant, job_id)
    if job.status == "cancelled":
        raise _cancelled(principal, job)
    now = time.time()
    job, lease = _take_and_count(principal, job, job_id, owner, ttl_s, takeover, now)
    halt = _halt_on_policy_change(principal, job, policy_hash, now)
    budget = budgets.exhausted(job, now, for_resume=True) or budgets.exhausted(job, now)
    checked, rewind = _verify_artifacts(job, artifacts)
    phase = previous_phase = job.phase
    if rewind is not None:
        order = phases_for(job)
        phase = order[order.index(rewind) - 1] if order.index(rewind) > 0 else None
        job_rows.set_job_phase(job.id, phase, now)
        audit(principal.tenant, job.id, principal.actor, "job_rewound",
              {"from": job.phase, "to": phase, "rebuild": rewind})
    audit(principal.tenant, job.id, principal.actor, "job_resumed",
          {"owner": owner, "fencing_token": lease.fencing_token, "attempt": job.resume_attempts})
    job = job_rows.job_by_pk(job.id)
    ops = operations_of_job(job.id)
    allowed = [] if (halt or budget) else list((job.checkpoint or {}).get("next_allowed_actions") or [])
    if rewind:
        allowed = [f"rebuild:{rewind}"]
    return {
        "job": job_dict(job, lease),
        "goal": {"job_id": job.job_id, "task_version": job.task_version, "pipeline": job.pipeline},
        "lease": lease_dict(lease),
        "fencing_token": lease.fencing_token,
        "phase": phase,
        "rewound_from": previous_phase if rewind else None,
        "rebuild_phase": rewind,
        "halted": bool(halt or budget),
        "halt_reason": halt or (budget and "budget_exhausted"),
        "budget": budget,
        "artifacts": checked,
        "needs_reconcile": [operation_dict(o, job_id) for o in ops if o.state in S.NEEDS_ATTENTION],
        "completed": [{"operation_key": o.operation_key, "action": o.action, "remote_id": o.remote_id}
                      for o in ops if o.state == S.CONFIRMED],
        "next_allowed_actions": allowed,
        "approvals": [a for a in (approval_dict(x) for x in job_rows.approvals_of_job(job.id))
                      if a["task_version"] == job.task_version],
        "summary": _summary(job, phase, ops, checked, halt or budget),
    }


def _take_and_count(principal, job, job_id, owner, ttl_s, takeover, now):
    """Take the lease, then count the attempt: (job re-read, lease).

    An attempt is a resume that took the lease: the lease first (a resume refused with 409
    lease_held raises here and counts nothing, so an intruder cannot burn the owner's
    max_resume_attempts), then ``resume_attempts + 1`` in its own statement (no lost count
    under concurrency). Not one transaction: holding the job row while waiting for the lease
    row could deadlock with a claim, which holds both FOR SHARE (see store/postgres.py). A
    crash between the two leaves one resume uncounted, never one counted twice; a cancel that
    committed in between leaves nothing to update and the resume is refused.
    """
    job, lease = acquire_lease(principal.tenant, job_id, owner, ttl_s, takeover, principal.actor)
    if job_rows.count_resume_attempt(job.id, now) != 1:
        raise _cancelled(principal, job)
    return job_rows.job_by_pk(job.id), lease


def _halt_on_policy_change(principal, job, policy_hash, now):
    """The job's halt reason: its own, or policy_changed (set now) when the policy moved."""
    halt = job.halt_reason if job.status == "halted" else None
    if halt is None and policy_hash is not None and job.policy_hash is not None and policy_hash != job.policy_hash:
        halt = "policy_changed"
        job_rows.mark_job_halted(job.id, halt, now)
        audit(principal.tenant, job.id, principal.actor, "job_halted",
              {"reason": halt, "approved_policy": job.policy_hash, "current_policy": policy_hash})
    return halt
