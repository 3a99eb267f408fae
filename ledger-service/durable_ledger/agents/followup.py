"""Guarded follow-up: a message is sent only when the ledger knows the state.

Refused (409 follow_up_refused, every reason listed) while a turn is queued, in progress or
waiting, while the session needs actions, while any operation of the job is SENT / UNKNOWN /
NEEDS_REVIEW, while the job is halted or cancelled or over a budget. Otherwise the message goes
out with a recovery packet built from ledger rows (not from the agent's own summary).

The follow-up is claimed by INSERT on (job, idempotency key) before the send:

    try 1: INSERT (sending) -> events.create(key K) ...... response lost
    try 2: INSERT conflicts -> row is 'sending' -> events.create(key K)  (the API dedupes on K)
    try 3: row is 'sent' -> answered from the row, nothing sent

so a retried call is one message.
"""

import time

import openai

from .. import store
from ..jobs.budgets import tool_calls_used
from ..kernel.checks import stored_budgets
from ..kernel.fields import BUDGETS
from ..kernel.digest import request_digest
from ..kernel.errors import AgentsApiError, DigestMismatch, FollowUpRefused
from ..kernel.fencing import check_fence
from ..store import sessions as session_store
from ..store import followups as followup_store
from .openai_client import sessions
from .sync import OPEN_TURN_STATUSES, retrieve_session


def _budget_reasons(job, now):
    b, out = stored_budgets(job, tuple(BUDGETS)), []
    if b.get("max_cost") is not None and job.cost >= b["max_cost"]:
        out.append({"reason": "budget_exhausted", "budget": "max_cost"})
    if b.get("max_tool_calls") is not None and tool_calls_used(job) >= b["max_tool_calls"]:
        out.append({"reason": "budget_exhausted", "budget": "max_tool_calls"})
    if b.get("max_resume_attempts") is not None and job.resume_attempts > b["max_resume_attempts"]:
        out.append({"reason": "budget_exhausted", "budget": "max_resume_attempts"})
    if b.get("deadline_s") is not None and now > job.created_at + b["deadline_s"]:
        out.append({"reason": "budget_exhausted", "budget": "deadline_s"})
    return out


def _open_turns(client, session_id):
    """The newest turns, read live: a stored view could be minutes old."""
    page = sessions(client).turns.list(session_id, order="desc", limit=20)
    return [t.id for t in page.data if t.status in OPEN_TURN_STATUSES]


def refusal_reasons(client, job, binding):
    reasons = []
    if job.status in ("halted", "cancelled"):
        reasons.append({"reason": f"job_{job.status}", "halt_reason": job.halt_reason})
    reasons += _budget_reasons(job, time.time())
    for key, state in session_store.unresolved_operations(job.id):
        reasons.append({"reason": "operation_unresolved", "operation_key": key, "state": state})
    try:
        session = retrieve_session(client, binding)
        turns = _open_turns(client, binding.session_id)
    except openai.APIError as exc:
        raise AgentsApiError("could not read the session state", {"error": type(exc).__name__}) from exc
    # budget_reached (openai 3.60+): the session is paused at its spending limit; a message would not run.
    if session.status in ("in_progress", "requires_action", "failed", "budget_reached"):
        reasons.append({"reason": f"session_{session.status}"})
    for turn_id in turns:
        reasons.append({"reason": "turn_open", "turn_id": turn_id})
    return reasons


def recovery_packet(job, message):
    """A structured, verified summary: only what the ledger holds evidence for."""
    cp = session_store.latest_checkpoint(job.id)
    confirmed = session_store.confirmed_operations(job.id)
    body = cp.body if cp else {}
    return {
        "job_id": job.job_id, "task_version": job.task_version, "phase": job.phase,
        "artifacts": body.get("artifacts", []), "next_allowed_actions": body.get("next_allowed_actions", []),
        "confirmed_operations": [{"action": a, "remote_id": r} for a, r in confirmed],
        "message": message,
    }


def _packet_text(packet):
    lines = [f"Recovery packet for job {packet['job_id']} (task version {packet['task_version']}, "
             f"phase {packet['phase'] or 'none'}). Verified by the ledger; do not redo confirmed operations."]
    for op in packet["confirmed_operations"]:
        lines.append(f"- done: {op['action']} (remote id {op['remote_id']})")
    for art in packet["artifacts"]:
        lines.append(f"- artifact {art.get('role')}: {art.get('uri')} sha256={art.get('sha256')}")
    if packet["next_allowed_actions"]:
        lines.append("Next allowed actions: " + ", ".join(packet["next_allowed_actions"]))
    lines.append("")
    lines.append(packet["message"])
    return "\n".join(lines)


def _claim(job, key, digest, packet):
    row, created = followup_store.claim_follow_up(job.id, key, digest, packet, time.time())
    if not created and row.request_hash != digest:
        raise DigestMismatch("this Idempotency-Key was used for another follow-up message",
                             {"idempotency_key": key})
    return row, created


def send_follow_up(client, job, binding, message, fencing_token, idempotency_key=None):
    """Returns (follow_up_row, sent_now)."""
    check_fence(store.lease_of(job.id), fencing_token)
    digest = request_digest({"message": message})
    key = idempotency_key or f"follow-up:{digest[:32]}"
    existing = followup_store.follow_up_of(job.id, key)
    if existing is not None and existing.state == "sent":
        if existing.request_hash != digest:
            raise DigestMismatch("this Idempotency-Key was used for another follow-up message",
                                 {"idempotency_key": key})
        return existing, False
    if existing is None:
        reasons = refusal_reasons(client, job, binding)
        if reasons:
            raise FollowUpRefused("a follow-up cannot be sent now: " + ", ".join(r["reason"] for r in reasons),
                                  {"reasons": reasons})
    row, _ = _claim(job, key, digest, recovery_packet(job, message))
    if row.state == "sent":
        return row, False
    event = {"type": "agent.session.input.message",
             "input": [{"type": "message", "role": "user",
                        "content": [{"type": "input_text", "text": _packet_text(row.packet)}]}]}
    remote_key = f"durable:{binding.session_id}:follow_up:{job.id}:{key}"
    followup_store.count_follow_up_attempt(row.id)
    try:
        sessions(client).events.create(binding.session_id, events=[event], idempotency_key=remote_key)
    except openai.APIError as exc:
        raise AgentsApiError("the follow-up was not acknowledged; retry with the same Idempotency-Key",
                             {"idempotency_key": key, "error": type(exc).__name__}) from exc
    followup_store.mark_follow_up_sent(row.id)
    return followup_store.follow_up_by_pk(row.id), True
