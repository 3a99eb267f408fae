"""Plain-dict views of rows, shared by the HTTP API, the CLI and reports.

Everything a caller stored as evidence (receipts, errors, event details, checkpoints) is shown
through ``redact``: checkpoints refuse credentials on write, but receipts and errors are the
remote's words (a 401 body quoting ``Authorization: Bearer ...``) and are kept as sent.
"""

import time
from datetime import datetime, timezone

from .. import store
from ..kernel.secrets import redact


def iso(ts):
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, tz=timezone.utc).isoformat().replace("+00:00", "Z")


def lease_dict(lease, now=None):
    if lease is None:
        return None
    now = time.time() if now is None else now
    return {
        "owner": lease.owner,
        "fencing_token": lease.fencing_token,
        "expires_at": iso(lease.expires_at),
        "live": lease.expires_at > now,
        # The holder's own word (heartbeats) that it is working until then; None: it never said.
        "live_until": iso(getattr(lease, "live_until", None)),
        "holder_working": lease.expires_at > now and (getattr(lease, "live_until", None) or 0) > now,
    }


def job_dict(job, lease=None):
    return {
        "job_id": job.job_id,
        "tenant": job.tenant,
        "task_version": job.task_version,
        "pipeline": job.pipeline,
        "phases": job.phases,
        "phase": job.phase,
        "status": job.status,
        "halt_reason": job.halt_reason,
        "session_id": job.session_id,
        "budgets": job.budgets or {},
        "counters": {"tool_calls": store.count_dispatches(job.id), "cost": job.cost, "resume_attempts": job.resume_attempts},
        "policy_hash": job.policy_hash,
        "fencing_token": lease.fencing_token if lease else 0,
        "lease": lease_dict(lease),
        "checkpoint": redact(job.checkpoint),
        "created_at": iso(job.created_at),
        "updated_at": iso(job.updated_at),
    }


def operation_dict(op, job_id=None):
    return {
        "operation_key": op.operation_key,
        "job_id": job_id if job_id is not None else (getattr(op, "job_key", None) or op.job.job_id),
        "task_version": op.task_version,
        "action": op.action,
        "state": op.state,
        "attempt": op.attempt,
        "max_attempts": op.max_attempts,
        "retryable": op.retryable,
        "fencing_token": op.fencing_token,
        "request_hash": op.request_hash,
        "target": op.target,
        "requires_approval": op.requires_approval,
        "remote_id": op.remote_id,
        "receipt": redact(op.receipt),
        "last_error": redact(op.last_error),
        "dispatched_by": getattr(op, "dispatched_by", None),
        "created_at": iso(op.created_at),
        "updated_at": iso(op.updated_at),
    }


def event_dict(ev):
    return {
        "from_state": ev.from_state,
        "to_state": ev.to_state,
        "actor": ev.actor,
        "fencing_token": ev.fencing_token,
        "detail": redact(ev.detail),
        "at": iso(ev.created_at),
    }


def checkpoint_dict(cp):
    body = redact(dict(cp.body))
    body.update({"seq": cp.seq, "phase": cp.phase, "task_version": cp.task_version,
                 "fencing_token": cp.fencing_token, "actor": cp.actor, "created_at": iso(cp.created_at)})
    return body


def approval_dict(a):
    return {"id": a.id, "job_id": a.job.job_id, "task_version": a.task_version, "action": a.action,
            "content_digest": a.content_digest, "target": a.target, "policy_hash": a.policy_hash,
            "expires_at": iso(a.expires_at), "approved_by": a.approved_by, "note": a.note,
            "approver": a.approver_name or (a.approved_by or "").split(":", 1)[-1], "door": a.door,
            "created_at": iso(a.created_at), "revoked_at": iso(a.revoked_at), "revoked_by": a.revoked_by,
            "used_at": iso(a.used_at), "live": a.revoked_at is None and a.expires_at > time.time()}


def decided_by(approvals, denials):
    """Who decided on an operation's request: [{name, decision, at, door}], oldest first, from its
    approval and denial rows (revoked, lifted and expired ones too: who said what, when). ``door``
    (console, link, api) is None on rows recorded before m0009."""
    out = [(a.created_at, {"name": a.approver_name or (a.approved_by or "").split(":", 1)[-1], "decision": "approved",
                           "at": iso(a.created_at), "door": a.door}) for a in approvals]
    out += [(d.created_at, {"name": (d.denied_by or "").split(":", 1)[-1], "decision": "denied",
                            "at": iso(d.created_at), "door": d.door}) for d in denials]
    return [entry for _, entry in sorted(out, key=lambda e: e[0])]
