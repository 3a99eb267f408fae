"""What the stateful tests (test_stateful.py) check after every step, read from the database and
from the answers: the invariants of issue 22 and the error shape. Each failure names its
invariant, so a Hypothesis report says which promise broke.

  one_dispatch     at most one dispatch (event to SENT) per operation and attempt, and at most
                   one `dispatch` answer per operation key and attempt
  approval         no SENT for an operation that needs an approval (its row says so, or
                   `publish` in an `article` job) without a live approval matching its job,
                   version, action, digest and target at that moment; for a step begun with an
                   approval policy, live approvals by as many distinct approvers the policy
                   allows as it needs (names, groups, not the runner that asked)
  fence            no SENT under a stale fencing token: a job's dispatch tokens never go down,
                   and a step's dispatches carry the token current during it
  cancel           no SENT for a job after its cancel answered
  error_shape      every 4xx in the error shape, never a 5xx
"""

import json
import time
from collections import Counter, defaultdict

from durable_ledger.store.models import (ALL_MODELS, ApiToken, Approval, ApprovalDenial, AuditLog, Job, Lease,
                                         Operation, OperationEvent, Setting)
from durable_ledger.store.wait_models import WAIT_MODELS

from stateful_model import gated, may_decide, rule_of


class Violation(AssertionError):
    """An invariant of issue 22 does not hold (the message starts with its name)."""


def reset_tables():
    """Empty what the machine writes (tokens and settings stay: the apps' bootstrap made them)."""
    for model in reversed(ALL_MODELS + WAIT_MODELS):
        if model not in (ApiToken, Setting):
            model.delete().execute()


def error_shape(status, body, slot=False):
    """Raise unless a 4xx body is {"error": {"code", "message", "details"}} (a batch slot also
    carries `http_status`); a 5xx is always a violation."""
    if status >= 500:
        raise Violation(f"error_shape: answered {status}: {json.dumps(body)[:300]}")
    if status < 400:
        return
    err = body.get("error") if isinstance(body, dict) else None
    keys = {"code", "message", "details"} | ({"http_status"} if slot else set())
    if not isinstance(err, dict) or set(err) != keys or not isinstance(err["code"], str) or not err["code"] \
            or not isinstance(err["message"], str) or not isinstance(err["details"], dict):
        raise Violation(f"error_shape: {status} not in the error shape: {json.dumps(body)[:300]}")


class Ledger:
    """The rows the invariants read, once per check."""

    def __init__(self):
        self.jobs = {j.id: j for j in Job.select()}
        self.ops = {o.id: o for o in Operation.select()}
        self.sent = list(OperationEvent.select().where(OperationEvent.to_state == "SENT").order_by(OperationEvent.id))
        self.approvals = defaultdict(list)
        for a in Approval.select():
            self.approvals[a.job_id].append(a)
        self.bumps = defaultdict(list)
        for row in AuditLog.select().where(AuditLog.action == "version_bumped"):
            self.bumps[row.job_id].append(row.created_at)

    def version_at(self, job_pk, t):
        return self.jobs[job_pk].task_version - sum(1 for at in self.bumps[job_pk] if at > t)


def check_ledger(cancelled_sent, step_tokens=None, seen_event=0):
    """The invariants on the tables. ``cancelled_sent``: {job name: SENT count when its cancel
    answered}; ``step_tokens``: {job name: the token current during this step} for the SENT
    events after id ``seen_event`` (None: a step with a takeover racing, only monotony holds).
    Returns the highest SENT event id."""
    led = Ledger()
    per_attempt = Counter()
    last_token = {}
    per_job = Counter()
    for ev in led.sent:
        op, job = led.ops[ev.operation_id], led.jobs[ev.job_id]
        attempt = (ev.detail or {}).get("attempt")
        per_attempt[(op.operation_key, attempt)] += 1
        if attempt is None or per_attempt[(op.operation_key, attempt)] > 1:
            raise Violation(f"one_dispatch: {op.operation_key} (job {job.job_id}) has "
                            f"{per_attempt[(op.operation_key, attempt)]} SENT events for attempt {attempt}")
        if op.requires_approval or gated(job.pipeline, op.action):
            _check_approved(led, ev, op, job)
        if ev.fencing_token < last_token.get(job.id, 0):
            raise Violation(f"fence: {op.operation_key} SENT with token {ev.fencing_token} after a dispatch of job "
                            f"{job.job_id} with token {last_token[job.id]}")
        last_token[job.id] = ev.fencing_token
        if step_tokens is not None and ev.id > seen_event and job.job_id in step_tokens \
                and ev.fencing_token != step_tokens[job.job_id]:
            raise Violation(f"fence: {op.operation_key} SENT with token {ev.fencing_token}; the current token was "
                            f"{step_tokens[job.job_id]}")
        per_job[job.job_id] += 1
    for name, count in cancelled_sent.items():
        if per_job[name] > count:
            raise Violation(f"cancel: job {name} got {per_job[name] - count} SENT event(s) after its cancel answered")
    return max((ev.id for ev in led.sent), default=seen_event)


def _check_approved(led, ev, op, job):
    """A live approval bound to the version, digest, target and job policy when it was SENT; under
    the step's approval policy, as many distinct approvers it allows as it needs."""
    t = ev.created_at
    version = led.version_at(job.id, t)
    approvers = set()
    for a in led.approvals[job.id]:
        if (a.action, a.content_digest, a.target or "", a.task_version, a.policy_hash) == (
                op.action, op.request_hash, op.target or "", version, job.policy_hash) \
                and a.created_at <= t < a.expires_at and (a.revoked_at is None or a.revoked_at > t):
            groups = tuple(g for g in (a.approver_groups or "").split(",") if g)
            if may_decide(op.approval_policy, a.approver_name, groups):
                approvers.add(a.approver_name)
    if len(approvers) >= rule_of(op.approval_policy)["approvals_needed"]:
        return
    raise Violation(f"approval: {op.operation_key} (action {op.action!r}, job {job.job_id}, pipeline {job.pipeline}, "
                    f"requires_approval={op.requires_approval}, policy {op.approval_policy}) SENT (attempt "
                    f"{(ev.detail or {}).get('attempt')}) with live matching approvals by {sorted(approvers)} only")


def db_operations():
    """{key: the fields the model keeps} for every operation row."""
    out = {}
    for o in Operation.select(Operation, Job).join(Job):
        out[o.operation_key] = dict(job=o.job.job_id, version=o.task_version, action=o.action, digest=o.request_hash,
                                    target=o.target, requires_approval=bool(o.requires_approval), state=o.state,
                                    attempt=o.attempt, max_attempts=o.max_attempts, policy=o.approval_policy)
    return out


def model_operations(model):
    return {k: dict(job=o.job, version=o.version, action=o.action, digest=o.digest, target=o.target,
                    requires_approval=o.requires_approval, state=o.state, attempt=o.attempt,
                    max_attempts=o.max_attempts, policy=o.policy)
            for k, o in model.ops.items()}


def sync_problem(model, rows=None):
    """None when the operation rows are what the model holds; else what differs."""
    rows = db_operations() if rows is None else rows
    want = model_operations(model)
    if rows == want:
        return None
    diff = {k: {"db": rows.get(k), "model": want.get(k)} for k in sorted(set(rows) | set(want))
            if rows.get(k) != want.get(k)}
    return f"the operation rows differ from the model: {json.dumps(diff, default=str)[:1500]}"


def db_leases(now=None):
    """{job name: (fencing token, owner, live, working)} of every lease row (live: not expired;
    working: live and its holder's heartbeat says it works, live_until ahead; jobs/leases.py)."""
    now = time.time() if now is None else now
    return {lease.job.job_id: (lease.fencing_token, lease.owner, lease.expires_at > now,
                               lease.expires_at > now and (lease.live_until or 0) > now)
            for lease in Lease.select(Lease, Job).join(Job)}


def lease_problem(model, leases=None):
    """None when the leases are what the model holds (token, owner, live, working); else what
    differs. Checked after every step; racing takeovers, leases and cancels can leave the same
    operation rows in orders that hand out different tokens, so a race's serial order is chosen
    on both."""
    leases = db_leases() if leases is None else leases
    want = {n: (j.token, j.owner, j.live, j.working) for n, j in model.jobs.items() if n in leases}
    got = {n: leases[n] for n in want}
    if got == want:
        return None
    return f"the leases differ from the model: db {got}, model {want}"


def model_from_db(model_cls, job_cls, op_cls, approval_cls, now):
    """The model rebuilt from the tables (DURABLE_STATEFUL_STRICT=0: after an answer the model did
    not expect, go on from what the ledger did, so the invariants keep being checked)."""
    m = model_cls()
    names = {}
    for j in Job.select():
        lease = Lease.get_or_none(Lease.job == j.id)
        sent = OperationEvent.select().where(OperationEvent.job == j.id, OperationEvent.to_state == "SENT").count()
        m.jobs[j.job_id] = job_cls(j.job_id, j.pipeline, dict(j.budgets or {}), j.task_version, j.status,
                                   j.halt_reason, lease.fencing_token if lease else 0, lease.owner if lease else "",
                                   bool(lease and lease.expires_at > now), sent,
                                   working=bool(lease and lease.expires_at > now and (lease.live_until or 0) > now))
        names[j.id] = j.job_id
    for o in Operation.select().order_by(Operation.id):
        m.ops[o.operation_key] = op_cls(o.operation_key, names[o.job_id], o.task_version, o.action, o.request_hash,
                                        o.target, bool(o.requires_approval), o.state, o.attempt, o.max_attempts,
                                        o.fencing_token, o.retryable, o.remote_id,
                                        bool((o.last_error or {}).get("reconciled")) and o.state == "FAILED",
                                        o.approval_policy)
    ids = []
    for a in Approval.select().order_by(Approval.id):
        m.approvals.append(approval_cls(names[a.job_id], a.task_version, a.action, a.content_digest, a.target or "",
                                        a.revoked_at is not None, a.used_at is not None, a.approver_name,
                                        tuple(g for g in (a.approver_groups or "").split(",") if g)))
        ids.append(a.id)
    for d in ApprovalDenial.select(ApprovalDenial, Operation).join(Operation).where(
            ApprovalDenial.lifted_at.is_null()):
        m.denials[(d.operation.operation_key, d.content_digest)] = d.denied_by.split(":", 1)[-1]
    return m, ids
