"""Executions waiting for an approval decision (n8n Wait nodes), resumed once per decision.

When the gate halts a step with ``approval_required`` the workflow can park itself in an n8n
Wait node ("Resume: On Webhook Call") instead of ending. Before it parks, the Durable Step
operation "Wait for Approval" registers the execution's resume URL for that operation
(`register_wait`). When an approver decides, `decision_made` (called by the approvals code after
its transaction committed) gives every open wait of the operation one delivery, and the
deliverer (`deliver_due`: a loop next to `durable-ledger serve`, or one pass of
`durable-ledger deliver-approvals`) POSTs ``{decision, reason, operation_key}`` to each resume URL.
The resumed execution goes back to Begin Step, and the gate (not the delivery's body) decides:
dispatch after an approval, halt/approval_denied after a denial.

Exactly one call per decision and wait:
- one delivery per wait (UNIQUE wait_id, inserted with ON CONFLICT DO NOTHING): a double click,
  or a second decision before the first was delivered, adds nothing;
- a deliverer owns a delivery only through a conditional UPDATE of its claim (state pending,
  the attempt count it read, no live claim); two deliverers (two ledger replicas) racing for the
  same row get row counts 1 and 0, and only the first calls n8n.

The one window left is a deliverer that dies after n8n answered and before it recorded that:

    deliverer A: claim (attempt 1) .. POST resume -> 200 .. (killed) ........................
    deliverer B:                                          claim expires .. claim (attempt 2) .. POST

n8n itself refuses the second call (409: the execution is running or finished, no longer
waiting), and even a resume that did land twice only makes Begin Step ask the gate again, which
never dispatches twice. The claim outlives the HTTP timeout, so a slow n8n is not called twice.

A wait registered after the decision was made (the approver was faster than the workflow) is
answered at once: its delivery is created with the registration. The deliverer also adopts open
waits whose operation has a standing decision that no `decision_made` announced (an approval
through ``POST /v1/approvals``, or a crash between the decision's commit and the call).

Resume URLs carry n8n's resume token (``?signature=...``): they are stored to be called, but
never logged, audited or returned whole (`redact_url`). They must be http(s) and point at an
allowed host (DURABLE_N8N_RESUME_HOSTS; default: loopback and the host of DURABLE_N8N_URL), so
a runner token cannot make the ledger call arbitrary addresses (SSRF).
"""

import hashlib
import logging
import time
from urllib.parse import urlsplit

import requests

from .. import store
from ..jobs.operations import get_operation
from ..jobs.serialize import iso
from ..kernel import links
from ..kernel import states as S
from ..kernel.errors import InvalidTransition, ValidationFailed
from ..kernel.fencing import check_fence
from ..store import waits as store_waits
from ..store.audit import audit
from ..store.db import write_txn
from ..store.waits import DELIVERED, FAILED, PENDING
from .rules import active_denial, decided_by, status_of

log = logging.getLogger("durable_ledger.approval_waits")

DECISIONS = ("approved", "denied")
LOOPBACK = ("localhost", "127.0.0.1", "::1")
MAX_URL = links.MAX_URL
CLAIM_S = 60.0  # longer than any resume call's timeout
ACTOR = "system:approval-waits"


# ---------------------------------------------------------------------- resume URLs

def allowed_hosts(n8n_url="", configured=""):
    """The hosts resume URLs may point at: ``host`` (any port) or ``host:port`` entries."""
    if configured and configured.strip():
        return frozenset(h.strip().lower() for h in configured.split(",") if h.strip())
    hosts = set(LOOPBACK)
    host = urlsplit(n8n_url).hostname if n8n_url else None
    if host:
        hosts.add(host.lower())
    return frozenset(hosts)


def check_resume_url(url, hosts):
    """Raise ValidationFailed unless ``url`` is an http(s) URL on an allowed host."""
    if not isinstance(url, str) or not url or len(url) > MAX_URL:
        raise ValidationFailed(f"resume_url must be a URL of at most {MAX_URL} characters", {"field": "resume_url"})
    try:
        parts = urlsplit(url)
        host, port = (parts.hostname or "").lower(), parts.port
    except ValueError as exc:
        raise ValidationFailed("resume_url is not a valid URL", {"field": "resume_url"}) from exc
    if parts.scheme not in ("http", "https") or not host:
        raise ValidationFailed("resume_url must be an http:// or https:// URL (n8n's $execution.resumeUrl)",
                               {"field": "resume_url"})
    if parts.username is not None or parts.password is not None:
        raise ValidationFailed("resume_url must not carry credentials", {"field": "resume_url"})
    with_port = f"{host}:{port}" if port else host
    if host not in hosts and with_port not in hosts and f"[{host}]:{port}" not in hosts:
        raise ValidationFailed(
            f"resume_url points at '{host}', which is not an allowed n8n host; "
            "set DURABLE_N8N_RESUME_HOSTS (or DURABLE_N8N_URL) on the ledger",
            {"field": "resume_url", "host": host, "allowed_hosts": sorted(hosts)})
    return url


def redact_url(url):
    """What may be shown of a resume URL: scheme, host, port and path; never the query (token)."""
    try:
        parts = urlsplit(url or "")
        netloc = parts.hostname or ""
        if ":" in netloc:
            netloc = f"[{netloc}]"
        if parts.port:
            netloc += f":{parts.port}"
    except ValueError:
        return "<invalid url>"
    return f"{parts.scheme}://{netloc}{parts.path}" + ("?<redacted>" if parts.query else "")


def _open_key(url):
    return hashlib.sha256(url.encode("utf-8")).hexdigest()


# ---------------------------------------------------------------------- register

def _standing_decision(op):
    """(decision, reason) already made for the operation as it stands, or (None, None)."""
    status = status_of(op)
    if status == "denied":
        denial = active_denial(op)
        return "denied", denial.reason if denial else None
    if status == "approved":
        return "approved", None
    return None, None


def _answered_before(wait, decision):
    """Whether this execution (same resume URL) was already resumed with ``decision`` for this
    operation. A standing decision that the gate still does not honour (an approval under another
    policy, say) must not resume the same execution again and again: it waits for a new one."""
    return store_waits.answered_before(wait, decision)


def register_wait(principal, key, resume_url, fencing_token, execution_id=None, workflow_id=None,
                  hosts=frozenset(LOOPBACK), now=None):
    """Returns (answer, created). The caller must hold the job's current lease, and the operation
    must be halted for an approval (PREPARED, requires_approval)."""
    check_resume_url(resume_url, hosts)
    op = get_operation(principal.tenant, key)
    now = time.time() if now is None else now
    open_key = _open_key(resume_url)
    with write_txn():
        check_fence(store.lease_of(op.job_id, lock=True), fencing_token)
        op = store_waits.operation_by_pk(op.id)
        if op.state != S.PREPARED or not op.requires_approval:
            raise InvalidTransition(
                f"operation is {op.state}; it is not waiting for an approval (wait only after Begin Step "
                "answered approval_required)", {"state": op.state, "operation_key": key})
        wait, created = store_waits.insert_wait(principal.tenant, op, key, resume_url, open_key, fencing_token,
                                                execution_id, workflow_id, principal.actor, now)
        delivery = store_waits.delivery_of(wait.id)
        if delivery is None:
            decision, reason = _standing_decision(op)
            if decision is not None and not _answered_before(wait, decision):
                # The approver was faster than the workflow: answer at once. The execution is not
                # parked yet (its Wait node runs after this call); n8n answers 409 until it is, and
                # the deliverer retries.
                store_waits.schedule_delivery(wait, decision, reason, now)
                delivery = store_waits.scheduled_delivery(wait.id)
        if created:
            audit(principal.tenant, op.job_id, principal.actor, "approval_wait_registered",
                  {"operation_key": key, "wait_id": wait.id, "execution_id": wait.execution_id,
                   "workflow_id": wait.workflow_id, "resume_url": redact_url(resume_url),
                   "fencing_token": fencing_token})
    return {"wait": wait_dict(wait, delivery), "decision": delivery.decision if delivery else None}, created


# ---------------------------------------------------------------------- decisions

def decision_made(tenant, operation_key, decision, reason=None, now=None):
    """Record that ``operation_key`` was approved or denied (``decision`` in {"approved", "denied"})
    so that every execution registered as waiting for it is resumed once. Returns how many
    deliveries this call scheduled (0 for a repeated decision: each wait has one)."""
    if decision not in DECISIONS:
        raise ValueError(f"decision must be one of {DECISIONS}, not {decision!r}")
    now = time.time() if now is None else now
    with write_txn():
        waits = store_waits.open_waits_without_delivery(tenant, operation_key)
        for wait in waits:
            store_waits.schedule_delivery(wait, decision, reason, now)
    if waits:
        log.info("approval decision %s for %s: %d waiting execution(s) to resume", decision, operation_key, len(waits))
    return len(waits)


def adopt_decided(limit=200, now=None):
    """Open waits without a delivery whose operation has a standing decision: schedule them."""
    now = time.time() if now is None else now
    orphans = store_waits.orphan_waits(limit)
    adopted = 0
    for wait in orphans:
        decision, reason = _standing_decision(wait.operation)
        if decision is not None and not _answered_before(wait, decision):
            with write_txn():
                store_waits.schedule_delivery(wait, decision, reason, now)
            adopted += 1
    return adopted


# ---------------------------------------------------------------------- delivery

def _backoff(attempts, base_s, max_s):
    return min(max_s, base_s * (2 ** max(0, attempts - 1)))


def _claim_delivery(d, now):
    with write_txn():
        return store_waits.claim_delivery(d, now, now + CLAIM_S)


def _classify(status, body):
    """'delivered', 'retry' or 'give_up' for n8n's answer to a resume call."""
    if status is not None and 200 <= status < 300:
        return "delivered"
    if status in (401, 403):
        return "give_up"  # the resume token is wrong: no retry makes it right
    if status == 409 and "finished" in (body or ""):
        return "give_up"  # the execution ended (e.g. cancelled in n8n): nobody waits any more
    return "retry"  # connection refused, timeout, 5xx, 404 while n8n starts, 409 not parked yet


def _post(url, body, timeout):
    try:
        r = requests.post(url, json=body, timeout=timeout, allow_redirects=False,
                          headers={"User-Agent": "durable-ledger/approval-waits"})
        return r.status_code, r.text[:300], None
    except requests.RequestException as exc:
        return None, None, type(exc).__name__


def deliver_one(d, wait, hosts, max_attempts=20, backoff_s=1.0, backoff_max_s=60.0, timeout_s=10.0, now=None,
                post=_post):
    """Claim, call and record one delivery. Returns 'delivered', 'retry', 'failed' or 'raced'."""
    now = time.time() if now is None else now
    if not _claim_delivery(d, now):
        return "raced"
    attempt = d.attempts + 1
    where = f"{redact_url(wait.resume_url)} (execution {wait.execution_id or '?'})"
    try:
        check_resume_url(wait.resume_url, hosts)  # the allow-list may have shrunk since registration
    except ValidationFailed as exc:
        status, text, error = None, None, "resume_host_not_allowed"
        verdict, detail = "give_up", exc.message
    else:
        log.debug("resuming %s for %s, attempt %d", where, d.operation_key, attempt)  # `where` is redacted
        status, text, error = post(wait.resume_url, {"decision": d.decision, "reason": d.reason,
                                                     "operation_key": d.operation_key,
                                                     "decided_by": decided_by(wait.operation)}, timeout_s)
        verdict, detail = _classify(status, text), text
    done = time.time()
    if verdict == "retry" and attempt >= max_attempts:
        verdict = "give_up"
    state = {"delivered": DELIVERED, "give_up": FAILED}.get(verdict, PENDING)
    last_error = None if state == DELIVERED else {"http_status": status, "error": error, "body": detail,
                                                  "attempt": attempt, "at": iso(done)}
    fields = {"state": state, "claimed_until": None, "last_status": status, "last_error": last_error}
    if state == DELIVERED:
        fields["delivered_at"] = done
    elif state == PENDING:
        fields["next_attempt_at"] = done + _backoff(attempt, backoff_s, backoff_max_s)
    with write_txn():
        n = store_waits.record_attempt(d.id, attempt, fields)
        if n == 1 and state == DELIVERED:
            store_waits.close_wait(wait.id)
        if n == 1 and state != PENDING:
            audit(wait.tenant, wait.job_id, ACTOR, "approval_resume_" + state,
                  {"operation_key": d.operation_key, "decision": d.decision, "wait_id": wait.id,
                   "execution_id": wait.execution_id, "workflow_id": wait.workflow_id, "attempts": attempt,
                   "resume_url": redact_url(wait.resume_url), "last_error": last_error})
    if state == DELIVERED:
        log.info("resumed %s for %s (%s) on attempt %d", where, d.operation_key, d.decision, attempt)
        return "delivered"
    if state == FAILED:
        log.warning("gave up resuming %s for %s after %d attempt(s): %s %s", where, d.operation_key, attempt,
                    status or error, (detail or "")[:120])
        return "failed"
    log.info("resume of %s for %s not delivered (attempt %d: %s); next in %.0f s", where, d.operation_key,
             attempt, status or error, fields["next_attempt_at"] - done)
    return "retry"


def deliver_due(hosts, limit=50, now=None, post=_post, adopt=True, **policy):
    """One pass: adopt decided orphans (``adopt``), then deliver what is due. Returns a tally."""
    now = time.time() if now is None else now
    tally = {"adopted": adopt_decided(now=now) if adopt else 0, "delivered": 0, "retry": 0, "failed": 0,
             "raced": 0}
    due = store_waits.due_deliveries(now, limit)
    for d in due:
        tally[deliver_one(d, d.wait, hosts, post=post, **policy)] += 1
    return tally


def policy_from(cfg):
    """The deliverer's keyword arguments from a Config."""
    return {"max_attempts": cfg.resume_max_attempts, "backoff_s": cfg.resume_backoff_s,
            "backoff_max_s": cfg.resume_backoff_max_s, "timeout_s": cfg.resume_timeout_s}


# ---------------------------------------------------------------------- views

def wait_dict(w, delivery=None):
    out = {"id": w.id, "operation_key": w.operation_key, "execution_id": w.execution_id,
           "workflow_id": w.workflow_id, "resume_url": redact_url(w.resume_url), "fencing_token": w.fencing_token,
           "registered_by": w.registered_by, "registered_at": iso(w.registered_at), "open": w.open_key is not None,
           "delivery": None}
    if delivery is not None:
        out["delivery"] = {"decision": delivery.decision, "reason": delivery.reason, "state": delivery.state,
                           "attempts": delivery.attempts, "next_attempt_at": iso(delivery.next_attempt_at)
                           if delivery.state == PENDING else None, "last_status": delivery.last_status,
                           "last_error": delivery.last_error, "created_at": iso(delivery.created_at),
                           "delivered_at": iso(delivery.delivered_at)}
    return out


def job_waits(tenant, job_pk):
    """Every wait of a job with its delivery, oldest first (the job timeline and GET .../waits)."""
    return [wait_dict(w, d) for w, d in store_waits.waits_of_job(tenant, job_pk)]
