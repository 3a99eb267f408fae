"""One job's history in time order, and the tenant's jobs list, for the console.

The timeline is assembled from the append-only records the ledger already keeps: operation
events (every transition, who, with which token), checkpoints, and the audit log (leases,
approvals, denials, reviews, halts, refusals, receipts reused). Nothing here writes. Everything
a caller stored (receipts, errors, event details, checkpoint bodies) is shown through ``redact``,
and becomes a link only if it is an http(s) URL (kernel/links.py). A lookup-result is the caller's
report, labelled as such; the n8n execution shown is only ever the one the ledger saw (the
request's X-N8N-Execution-Id, stamped by kernel/n8n_context.py), never one a caller wrote down.
"""

from ..kernel import states as S
from ..kernel.links import http_url
from ..kernel.n8n_context import clean_id
from ..kernel.secrets import redact
from ..store import jobs as job_rows
from ..store import operations as op_rows
from ..store.audit import REFUSAL_PREFIX
from . import budgets
from .evidence import asked_of
from .jobs import get_job_and_lease
from .serialize import iso, lease_dict

PAGE_SIZE = 25
UNKNOWNISH = (S.UNKNOWN, S.NEEDS_REVIEW)  # "has unknown": an outcome nobody has proven yet


def _n8n(detail):
    n = (detail or {}).get("n8n") if isinstance(detail, dict) else None
    if isinstance(n, dict) and (clean_id(n.get("execution_id")) or clean_id(n.get("workflow_id"))):
        return {"execution_id": clean_id(n.get("execution_id")) or "", "workflow_id": clean_id(n.get("workflow_id")) or ""}
    return None


def _event_text(ev, action):
    d = ev.detail or {}
    if d.get("no_reconciler"):
        return f"no reconciler for {d['no_reconciler']}: the remote system was not asked; an editor decides → " \
               f"{ev.to_state}", "warn"
    if "reconciled" in d and d.get("source") == "caller_lookup":
        return f"reported by {ev.actor} via lookup-result: {d['reconciled']} → {ev.to_state}", "reported"
    if "reconciled" in d and d.get("not_asked"):
        return f"the remote system was not asked: {d.get('detail')} → {ev.to_state}", "reconcile"
    if "reconciled" in d:
        of = asked_of(d)
        asked = f" (asked {of}" + (f": HTTP {d['status']}" if isinstance(d.get("status"), int) else "") + ")"
        return f"reconciled with the remote system: {d.get('verdict') or d['reconciled']} → {ev.to_state}" \
               f"{asked if of else ''}", "reconcile"
    if "reconcile_error" in d:
        return f"reconciliation could not ask the remote system ({d['reconcile_error']}); state unchanged", \
            "reconcile"
    if "review" in d:
        return f"reviewed by an editor: {d['review']} → {ev.to_state}", "review"
    if ev.to_state == S.PREPARED:
        return "prepared; waiting for an approval" if d.get("reason") == "approval_required" else "prepared", "wait"
    if ev.to_state == S.SENT:
        return f"sent (attempt {d.get('attempt', 1)}): persisted before dispatch", "sent"
    if ev.to_state == S.CONFIRMED:
        return f"confirmed: remote id {d.get('remote_id')}", "ok"
    if ev.to_state == S.FAILED:
        return ("failed, retry allowed" if d.get("retryable") else "failed permanently"), "bad"
    if ev.to_state == S.UNKNOWN:
        return "outcome unknown (sent, no proof either way)", "warn"
    return f"{ev.from_state or '—'} → {ev.to_state}", "op"


_AUDIT_TEXT = {
    "job_created": ("job created", "job"),
    "lease_acquired": ("lease acquired by {owner}: fencing token {fencing_token}", "lease"),
    "lease_taken_over": ("lease taken over by {owner} from {previous_owner}: fencing token {fencing_token}", "lease"),
    "version_bumped": ("task version {from} → {to}", "job"),
    "approval_granted": ("approval granted for {action}{by_door}, expires {expires_iso}{progress}", "approval"),
    "approval_used": ("approval used: {action} dispatched", "approval"),
    "approval_revoked": ("approval revoked", "approval"),
    "approval_denied": ("approval denied{by_door}: {reason}", "denied"),
    "review_resolved": ("review resolved: {decision}", "review"),
    "receipt_reused": ("receipt reused: not repeated, remote id {remote_id}", "reuse"),
    "receipt_kept": ("receipt of a fenced-out execution kept as evidence, not as the outcome: remote id {remote_id}",
                     "bad"),
    "job_halted": ("job halted: {reason}", "bad"),
    "job_cancelled": ("job cancelled", "bad"),
    "job_resumed": ("resumed by {owner} (attempt {attempt})", "lease"),
    "job_rewound": ("rewound from {from} to {to}", "job"),
    "job_reauthorized": ("re-authorised", "job"),
}


def _audit_text(row):
    d = dict(row.detail or {})
    if row.action.startswith(REFUSAL_PREFIX):
        code = row.action[len(REFUSAL_PREFIX):]
        reason = d.get("reason")
        return (f"refused: {code}: {reason}" if isinstance(reason, str) and reason and reason != code
                else f"refused: {code}"), "refusal"
    text, kind = _AUDIT_TEXT.get(row.action, (row.action.replace("_", " "), "job"))
    if "expires_at" in d and isinstance(d["expires_at"], (int, float)):
        d["expires_iso"] = iso(d["expires_at"])
    # Who decided and through which door (console, one-tap link, API); rows before m0009 have neither.
    d["by_door"] = (f" by {d['by']}" + (f" ({d['door']})" if d.get("door") else "")) if d.get("by") else ""
    d["progress"] = f" ({d['approvals']} of {d['approvals_needed']})" \
        if isinstance(d.get("approvals_needed"), int) and d["approvals_needed"] > 1 else ""

    class _Blank(dict):
        def __missing__(self, k):
            return "?"
    return text.format_map(_Blank(d)), kind


def job_timeline(tenant, job_id, n8n_url=""):
    """The job (tenant-scoped: another tenant's id is JobNotFound), its operations and its history."""
    job, lease = get_job_and_lease(tenant, job_id)
    ops = op_rows.operations_of_job(job.id)
    by_id = {op.id: op for op in ops}
    entries = []
    for ev in op_rows.operation_events_of_job(job.id):
        op = by_id.get(ev.operation_id)
        text, kind = _event_text(ev, op.action if op else "?")
        entries.append({"ts": ev.created_at, "seq": (0, ev.id), "kind": kind, "subject": op.action if op else "?",
                        "operation_key": op.operation_key if op else None, "text": text, "who": ev.actor,
                        "fencing_token": ev.fencing_token, "state": ev.to_state, "detail": redact(ev.detail),
                        "n8n": _n8n(ev.detail)})
    for cp in job_rows.checkpoints_of_job(job.id):
        body = redact(dict(cp.body or {}))
        entries.append({"ts": cp.created_at, "seq": (1, cp.id), "kind": "checkpoint", "subject": cp.phase,
                        "operation_key": None, "text": f"checkpoint #{cp.seq}: phase {cp.phase} (v{cp.task_version})",
                        "who": cp.actor, "fencing_token": cp.fencing_token, "state": None,
                        "artifacts": body.get("artifacts") or [], "detail": {k: v for k, v in body.items()
                                                                             if k != "artifacts" and v},
                        "n8n": _n8n(body)})
    for row in job_rows.audit_entries_of_job(job.id):
        if row.action == "checkpoint":
            continue  # the checkpoint row itself is shown, with its artifacts
        text, kind = _audit_text(row)
        d = redact(row.detail or {})
        entries.append({"ts": row.created_at, "seq": (2, row.id), "kind": kind,
                        "subject": d.get("action") or (d.get("operation_key") or "").rsplit(":", 1)[-1] or "job",
                        "operation_key": d.get("operation_key"), "text": text, "who": row.actor,
                        "fencing_token": d.get("fencing_token"), "state": None, "detail": d, "n8n": _n8n(row.detail)})
    entries.sort(key=lambda e: (e["ts"], e["seq"]))
    for e in entries:
        e["at"] = iso(e["ts"])
        if e["n8n"]:
            e["n8n"]["url"] = n8n_link(n8n_url, e["n8n"])
    return {"job": job, "created": iso(job.created_at), "lease": lease_dict(lease), "operations": [_op_row(op) for op in ops],
            "entries": entries, "budgets": budgets.usage(job)}


def n8n_link(base, n8n):
    if not base or not n8n or not n8n.get("execution_id"):
        return None
    if n8n.get("workflow_id"):
        return f"{base}/workflow/{n8n['workflow_id']}/executions/{n8n['execution_id']}"
    return f"{base}/executions/{n8n['execution_id']}"


def _op_row(op):
    receipt = redact(op.receipt or {})
    evidence = op.evidence or {}
    found = []
    if isinstance(receipt, dict):
        found += [(label, receipt.get(k)) for label, k in (("open in WordPress", "edit_url"), ("view", "link"))
                  if receipt.get(k) not in (None, "")]
    for c in evidence.get("candidates") or []:
        if isinstance(c, dict) and str(c.get("id")) == str(op.remote_id) and c.get("edit_url") not in (None, ""):
            found.append(("open in WordPress", c["edit_url"]))
    links = [(label, http_url(v)) for label, v in found if http_url(v)]
    unlinked = [(label, str(v)[:300]) for label, v in found if not http_url(v)]
    return {"operation_key": op.operation_key, "action": op.action, "state": op.state, "attempt": op.attempt,
            "max_attempts": op.max_attempts, "fencing_token": op.fencing_token, "target": op.target,
            "remote_id": op.remote_id, "request_hash": op.request_hash, "requires_approval": op.requires_approval,
            "receipt": receipt, "last_error": redact(op.last_error), "reconcile_attempts": op.reconcile_attempts,
            "links": list(dict.fromkeys(links)), "unlinked": list(dict.fromkeys(unlinked)),
            "updated_at": iso(op.updated_at)}


def list_jobs(tenant, status=None, phase=None, has_unknown=False, awaiting_approval=False, search=None, page=1):
    """(rows, total) for one page of the tenant's jobs, most recently updated first."""
    jobs, total = job_rows.page_of_jobs(tenant, page, PAGE_SIZE, status=status, phase=phase, search=search,
                                        unknown_states=UNKNOWNISH if has_unknown else None,
                                        awaiting_approval=awaiting_approval)
    counts = {}
    if jobs:
        for job_pk, state, n in op_rows.operation_state_counts_of_jobs([j.id for j in jobs]):
            counts.setdefault(job_pk, {})[state] = n
    waiting, denied = set(), set()
    if jobs:
        waiting = op_rows.jobs_with_operations_awaiting_approval([j.id for j in jobs])
        denied = job_rows.jobs_with_standing_denial(waiting) if waiting else set()
    rows = [{"job_id": j.job_id, "status": j.status, "halt_reason": j.halt_reason, "phase": j.phase,
             "pipeline": j.pipeline, "task_version": j.task_version, "states": counts.get(j.id, {}),
             "unknown": sum(counts.get(j.id, {}).get(s, 0) for s in UNKNOWNISH),
             "awaiting_approval": j.id in waiting and j.id not in denied, "denied": j.id in denied,
             "updated_at": iso(j.updated_at)} for j in jobs]
    return rows, total


def tenant_phases(tenant):
    return job_rows.job_phases_of_tenant(tenant)

