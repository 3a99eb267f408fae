"""A plain-Python model of the ledger's decision table, for the stateful tests (test_stateful.py).

It knows jobs (pipeline, budgets, version, status, lease), operations (state, attempt, digest,
stored action/target/approval need), approvals and denials, and says for every call which
answers the ledger may give and what each does to the state. Most calls have one answer; where
the issue leaves the choice to the gate (a begin whose action, target or approval need differs
from the stored operation: refused with 422, or decided on the stored facts), `Outcome`s list
every acceptable one. Nothing here reads the database.

An expected answer is `Ok(decision, reason)` for a 200 from the gate, `Ok("ok")` for another
2xx, or `Err(status, code)`; ``code`` ANY accepts any code with that status.
"""

import copy
from dataclasses import dataclass, field

from durable_ledger.kernel.digest import request_digest

TENANT = "acme"
ANY = "*"
GATED = {"article": ("publish",)}  # approvals/rules.py ALWAYS_GATED, as the issue states it
IN_FLIGHT = ("SENT", "UNKNOWN")
CONFIRMABLE = ("SENT", "UNKNOWN", "NEEDS_REVIEW")


RUNNER_NAME = "bootstrap-acme-runner"  # the runner token's name: the requester of every step
DEFAULT_RULE = {"approvals_needed": 1, "approvers": [], "groups": [], "requester_may_approve": True}


def rule_of(policy):
    """The rule of a stored policy (None: one approval by anyone), as approvals/policy.py states it."""
    return {k: (policy or DEFAULT_RULE).get(k, v) for k, v in DEFAULT_RULE.items()}


def may_decide(policy, name, groups):
    """Whether the step's policy lets ``name`` (with ``groups``) approve or deny it."""
    if policy is None:
        return True
    rule = rule_of(policy)
    if not rule["requester_may_approve"] and name == policy.get("requested_by"):
        return False
    if rule["approvers"] or rule["groups"]:
        return name in rule["approvers"] or bool(set(rule["groups"]) & set(groups))
    return True


def gated(pipeline, action):
    return any(action == a or action.endswith("." + a) or action.startswith(a + ":") for a in GATED.get(pipeline, ()))


@dataclass(frozen=True)
class Ok:
    decision: str = "ok"
    reason: str | None = None
    attempt: int | None = None  # dispatch: the attempt the answer names


@dataclass(frozen=True)
class Err:
    status: int
    code: str


@dataclass
class MJob:
    name: str
    pipeline: str
    budgets: dict
    version: int = 1
    status: str = "active"
    halt_reason: str | None = None
    token: int = 1
    owner: str = "w1"
    live: bool = True  # the lease (expired by a cancel or a release)
    dispatches: int = 0  # SENT events of the job (the tool-call budget counts them)
    working: bool = False  # the holder's heartbeat is recent (lease.live_until ahead; jobs/leases.py)


@dataclass
class MOp:
    key: str
    job: str
    version: int
    action: str
    digest: str
    target: str | None
    requires_approval: bool
    state: str
    attempt: int
    max_attempts: int
    token: int
    retryable: bool | None = None
    remote_id: str | None = None
    reconciled_absent: bool = False
    policy: dict | None = None  # the approval policy stored at the first begin (rule + requested_by)


@dataclass
class MApproval:
    job: str
    version: int
    action: str
    digest: str
    target: str  # "" for an operation without a target
    revoked: bool = False
    used: bool = False
    by: str = "bootstrap-acme-approver"  # the approver's name
    groups: tuple = ()  # and groups


@dataclass
class Outcome:
    expect: object  # Ok or Err
    apply: object = None  # fn(model) -> None, the state change when this answer is the one given
    dispatched: tuple | None = None  # (key, attempt) a dispatch answer claims
    beat: bool | None = None  # a carried heartbeat's result: held or not (None: the answer has none)


def digest_of(payload):
    return request_digest(payload)


def default_key(job, version, action):
    return f"{TENANT}:{job}:v{version}:{action}"


@dataclass
class Model:
    jobs: dict = field(default_factory=dict)
    ops: dict = field(default_factory=dict)
    approvals: list = field(default_factory=list)
    denials: dict = field(default_factory=dict)  # (key, digest) standing -> who denied

    def clone(self):
        return copy.deepcopy(self)

    # ---- jobs and leases -------------------------------------------------------------------

    def create_job(self, name, pipeline, budgets):
        if name in self.jobs:
            return [Outcome(Ok())]
        return [Outcome(Ok(), lambda m: m.jobs.__setitem__(name, MJob(name, pipeline, dict(budgets))))]

    def lease(self, name, owner, takeover):
        j = self.jobs.get(name)
        if j is None:
            return [Outcome(Err(404, "job_not_found"))]
        if j.live and j.owner == owner:
            return [Outcome(Ok())]
        if j.live and not takeover:
            return [Outcome(Err(409, "lease_held"))]

        def take(m):
            mj = m.jobs[name]
            mj.token, mj.owner, mj.live, mj.working = mj.token + 1, owner, True, False
        return [Outcome(Ok(), take)]

    def start(self, name, owner, live_s):
        """Start Job of an existing job at its own version, taking over only a holder that is not
        working (``if_live: wait``); ``live_s``: the new holder's liveness (None: none asked)."""
        j = self.jobs.get(name)
        if j is None:
            return [Outcome(Err(404, "job_not_found"))]
        working = live_s is not None and live_s > 0
        if j.live and j.owner == owner:
            def extend(m):
                if live_s is not None:
                    m.jobs[name].working = working
            return [Outcome(Ok(), extend)]
        if j.live and j.working:
            return [Outcome(Err(409, "holder_live"))]

        def take(m):
            mj = m.jobs[name]
            mj.token, mj.owner, mj.live, mj.working = mj.token + 1, owner, True, working
        return [Outcome(Ok(), take)]

    def heartbeat(self, name, owner, token, live_s):
        """Renew by the holder: only the lease's owner with its current token, and only while the
        lease has not expired (a beat landing after a cancel or a release is lease_lost)."""
        j = self.jobs.get(name)
        if j is None:
            return [Outcome(Err(404, "job_not_found"))]
        if not (j.live and j.owner == owner and j.token == token):
            return [Outcome(Err(409, "lease_lost"))]

        def beat(m):
            if live_s is not None:
                m.jobs[name].working = live_s > 0
        return [Outcome(Ok(), beat)]

    def carrying(self, outs, name, owner, token, live_s):
        """A begin's or a confirm's outcomes when the call carries the holder's heartbeat
        ({owner, live_s} with the call's own token): an answer that is not a refusal is followed
        by the renew `heartbeat` models, on the state the call's own work left (``beat``: whether
        the answer says held); a refusal beats nothing and says nothing of a heartbeat."""
        carried = []
        for out in outs:
            if isinstance(out.expect, Err):
                carried.append(out)
                continue
            after = self.clone()
            if out.apply is not None:
                out.apply(after)
            renew = after.heartbeat(name, owner, token, live_s)[0]
            carried.append(Outcome(out.expect, _then_all(out.apply, renew.apply), out.dispatched,
                                   isinstance(renew.expect, Ok)))
        return carried

    def release(self, name, owner, token):
        j = self.jobs.get(name)
        if j is None:
            return [Outcome(Err(404, "job_not_found"))]
        if not (j.owner == owner and j.token == token):
            return [Outcome(Err(409, "lease_lost"))]

        def apply(m):
            m.jobs[name].live = m.jobs[name].working = False
        return [Outcome(Ok(), apply)]

    def fence(self, name, token):
        current = self.jobs[name].token
        if token < current:
            return Err(409, "stale_fencing_token")
        if token > current:
            return Err(422, "fencing_token_not_issued")
        return None

    def bump_version(self, name, token):
        if name not in self.jobs:
            return [Outcome(Err(404, "job_not_found"))]
        refused = self.fence(name, token)
        if refused:
            return [Outcome(refused)]
        return [Outcome(Ok(), lambda m: setattr(m.jobs[name], "version", m.jobs[name].version + 1))]

    def cancel(self, name):
        if name not in self.jobs:
            return [Outcome(Err(404, "job_not_found"))]

        def apply(m):
            j = m.jobs[name]
            j.status, j.halt_reason, j.live, j.working = "cancelled", "cancelled", False, False
        return [Outcome(Ok(), apply)]

    # ---- approvals -------------------------------------------------------------------------

    def live_approval(self, job, action, digest, target, policy=None):
        """The approval a dispatch would spend, or None: without a policy the newest live match;
        with one, the newest of the first live approval of each allowed approver, once there
        are as many of them as the policy needs."""
        want = target or ""
        live = [a for a in self.approvals
                if (a.job, a.version, a.action, a.digest, a.target, a.revoked) == (job.name, job.version, action, digest,
                                                                                   want, False)]
        if policy is None:
            return live[-1] if live else None
        counted = self._counted(policy, live)
        return counted[-1] if len(counted) >= rule_of(policy)["approvals_needed"] else None

    @staticmethod
    def _counted(policy, live):
        seen, out = set(), []
        for a in live:
            if a.by not in seen and may_decide(policy, a.by, a.groups):
                seen.add(a.by)
                out.append(a)
        return out

    def _satisfied(self, op):
        counted = self._counted(op.policy, self._binding(op))
        return len(counted) >= rule_of(op.policy)["approvals_needed"]

    def _binding(self, op, live_only=True):
        return [a for a in self.approvals
                if (a.job, a.version, a.action, a.digest, a.target) == (op.job, op.version, op.action, op.digest,
                                                                       op.target or "")
                and not (live_only and a.revoked)]

    def grant(self, name, version, action, digest, target, who=("bootstrap-acme-approver", ())):
        if name not in self.jobs:
            return [Outcome(Err(404, "job_not_found"))]
        return [Outcome(Ok(), lambda m: m.approvals.append(MApproval(name, version, action, digest, target,
                                                                     by=who[0], groups=tuple(who[1]))))]

    def revoke(self, index):
        def apply(m):
            m.approvals[index].revoked = True
        return [Outcome(Ok(), apply)]

    def approve(self, key, digest, who=("bootstrap-acme-approver", ())):
        name, groups = who
        op = self.ops.get(key)
        if op is None:
            return [Outcome(Err(404, "operation_not_found"))]
        if digest != op.digest:
            return [Outcome(Err(409, "content_changed"))]
        if not may_decide(op.policy, name, groups):
            return [Outcome(Err(403, "approver_not_allowed"))]
        if op.state != "PREPARED" or not op.requires_approval:
            if self._binding(op):
                return [Outcome(Ok())]
            return [Outcome(Err(409, "invalid_transition"))]
        if any(a.by == name for a in self._binding(op)) or self._satisfied(op):
            return [Outcome(Ok())]  # counted once; or the policy has its count
        denier = self.denials.get((key, op.digest))
        if denier is not None and op.policy is not None and denier != name:
            return [Outcome(Err(409, "decision_changed"))]  # one allowed approver's no is not outvoted

        def apply(m):
            o = m.ops[key]
            m.approvals.append(MApproval(o.job, o.version, o.action, o.digest, o.target or "", by=name,
                                         groups=tuple(groups)))
            m.denials.pop((key, o.digest), None)
        return [Outcome(Ok(), apply)]

    def deny(self, key, digest, who=("bootstrap-acme-approver", ())):
        op = self.ops.get(key)
        if op is None:
            return [Outcome(Err(404, "operation_not_found"))]
        if digest != op.digest:
            return [Outcome(Err(409, "content_changed"))]
        if not may_decide(op.policy, *who):
            return [Outcome(Err(403, "approver_not_allowed"))]
        if op.state != "PREPARED" or not op.requires_approval:
            return [Outcome(Err(409, "invalid_transition"))]
        if (key, op.digest) in self.denials:
            return [Outcome(Ok())]

        def apply(m):
            o = m.ops[key]
            m.denials[(key, o.digest)] = who[0]
            for a in m._binding(o):
                if not a.used:
                    a.revoked = True
        return [Outcome(Ok(), apply)]

    # ---- outcomes --------------------------------------------------------------------------

    def _moved(self, key, token, allowed, to_state, **fields):
        op = self.ops[key]
        if op.state not in allowed:
            # A fenced-out caller hears that it was taken over; a current one that the move is not allowed.
            stale = token < self.jobs[op.job].token
            return [Outcome(Err(409, "stale_fencing_token" if stale else "invalid_transition"))]
        refused = self.fence(op.job, token)
        if refused:
            return [Outcome(refused)]

        def apply(m):
            o = m.ops[key]
            o.state = to_state
            for k, v in fields.items():
                setattr(o, k, v)
        return [Outcome(Ok(), apply)]

    def confirm(self, key, token, remote_id):
        op = self.ops.get(key)
        if op is None:
            return [Outcome(Err(404, "operation_not_found"))]
        if op.state == "CONFIRMED":
            return [Outcome(Ok() if op.remote_id == remote_id else Err(409, "receipt_conflict"))]
        if op.state in CONFIRMABLE and token == op.token and token < self.jobs[op.job].token:
            # The attempt's own answer after a takeover settles it (reconciliation/attempts.py settle_own).
            def settle(m):
                m.ops[key].state, m.ops[key].remote_id = "CONFIRMED", remote_id
            return [Outcome(Ok(), settle)]
        return self._moved(key, token, CONFIRMABLE, "CONFIRMED", remote_id=remote_id)

    def fail(self, key, token, retryable, halt=False):
        op = self.ops.get(key)
        if op is None:
            return [Outcome(Err(404, "operation_not_found"))]
        if op.state == "FAILED" and op.token == token:
            return [Outcome(Ok())]
        outs = self._moved(key, token, ("SENT",), "FAILED", retryable=retryable, reconciled_absent=False)
        if halt and outs[0].apply is not None:
            moved = outs[0].apply

            def apply(m):
                moved(m)
                j = m.jobs[m.ops[key].job]
                if j.status == "active":
                    j.status, j.halt_reason = "halted", "authorization_revoked"
            outs = [Outcome(Ok(), apply)]
        return outs

    def unknown(self, key, token):
        op = self.ops.get(key)
        if op is None:
            return [Outcome(Err(404, "operation_not_found"))]
        if op.state == "UNKNOWN":
            return [Outcome(Ok())]
        return self._moved(key, token, ("SENT",), "UNKNOWN")

    def outcome(self, key, token, kind, remote_id):
        """``kind``: what POST /outcome is told: ok (2xx + remote id), invalid (422), forbidden (403),
        error (500), timeout."""
        if kind == "ok":
            return self.confirm(key, token, remote_id)
        if kind == "invalid":
            return self.fail(key, token, True)
        if kind == "forbidden":
            return self.fail(key, token, False, halt=True)
        return self.unknown(key, token)

    def lookup(self, key, token, attempt, result, remote_id):
        """POST /lookup-result: the verdict (if the attempt is in flight), then the gate again."""
        op = self.ops.get(key)
        if op is None:
            return [Outcome(Err(404, "operation_not_found"))]
        verdict = self.verdict(key, token, attempt, result, remote_id)
        if isinstance(verdict, Err):
            return [Outcome(verdict)]
        after = self.clone()
        if verdict:
            for k, v in verdict.items():
                setattr(after.ops[key], k, v)
        stored = after.ops[key]
        outs = after.begin(stored.job, stored.action, stored.digest, key, stored.target, stored.requires_approval,
                           token)
        return [Outcome(o.expect, _then(verdict, key, o.apply), o.dispatched) for o in outs]

    def verdict(self, key, token, attempt, result, remote_id):
        """The first half of lookup-result (its own transaction): the fields the verdict sets, None
        (the attempt is not in flight: nothing to apply), or the fence's refusal."""
        op = self.ops[key]
        if op.state not in IN_FLIGHT or op.attempt != attempt:
            return None
        refused = self.fence(op.job, token)
        if refused:
            return refused
        return {"found": {"state": "CONFIRMED", "remote_id": remote_id},
                "absent": {"state": "FAILED", "retryable": True, "reconciled_absent": True},
                "undecidable": {"state": "NEEDS_REVIEW"}}[result]

    # ---- the gate --------------------------------------------------------------------------

    def begin(self, name, action, digest, key, target, requires_approval, token, policy=None):
        """``policy``: the begin's approval_policy, normalized (None: not named)."""
        job = self.jobs.get(name)
        if job is None:
            return [Outcome(Err(404, "job_not_found"))]
        key = key or default_key(name, job.version, action)
        fenced = self.fence(name, token)
        op = self.ops.get(key)
        differs = []
        if op is not None and not target:
            target = op.target  # a begin naming no target names none to disagree with: the stored one
        if op is not None:
            differs = [f for f, same in (("digest", op.digest == digest), ("job", op.job == name),
                                         ("action", op.action == action), ("target", op.target == target)) if not same]
        if differs:
            refusal = Outcome(Err(422, "digest_mismatch" if differs == ["digest"] else ANY))
            # The fence and the stored-row checks may come in either order.
            return [Outcome(fenced), refusal] if fenced else [refusal]
        if op is not None and policy is not None and rule_of(op.policy) != policy:
            refusal = Outcome(Err(409, "approval_policy_changed"))  # who may approve never changes
            return [Outcome(fenced), refusal] if fenced else [refusal]
        if fenced:
            return [Outcome(fenced)]
        asked = bool(requires_approval) or policy is not None or gated(job.pipeline, action)
        if op is None:
            stored = None if policy is None else {**policy, "requested_by": RUNNER_NAME}
            return [self._decide(job, None, key, action, digest, target, requires_approval or policy is not None,
                                 asked, token, stored)]
        stored = op.requires_approval or gated(job.pipeline, op.action)
        if asked == stored:
            return [self._decide(job, op, key, action, digest, target, requires_approval, stored, token)]
        # The request disagrees with the stored approval need: a refusal, or the stored need
        # (never lowered); a raised need may also be honoured.
        outs = [Outcome(Err(422, ANY)), self._decide(job, op, key, action, digest, target, requires_approval, stored,
                                                    token)]
        if asked:
            outs.append(self._decide(job, op, key, action, digest, target, requires_approval, True, token))
        return outs

    def _decide(self, job, op, key, action, digest, target, requires_approval, need, token, new_policy=None):
        policy = op.policy if op is not None else new_policy
        if job.status in ("cancelled", "halted"):
            return Outcome(Ok("halt", job.halt_reason or job.status))
        if op is None or op.state in ("PREPARED", "FAILED"):
            if self._budget_used_up(job):
                return Outcome(Ok("halt", "budget_exhausted"))
            if need and self.live_approval(job, action, digest, target, policy) is None:
                if op is not None and (key, digest) in self.denials:
                    return Outcome(Ok("halt", "approval_denied"))
                if op is None:
                    new = MOp(key, job.name, job.version, action, digest, target, True, "PREPARED", 1,
                              self._max_attempts(job), token, policy=policy)
                    return Outcome(Ok("halt", "approval_required"), lambda m: m.ops.__setitem__(key, copy.copy(new)))
                return Outcome(Ok("halt", "approval_required"))
        if op is None:
            new = MOp(key, job.name, job.version, action, digest, target, bool(requires_approval) or need, "SENT", 1,
                      self._max_attempts(job), token, policy=policy)
            return self._dispatch(job, key, 1, need, action, digest, target, lambda m: m.ops.__setitem__(
                key, copy.copy(new)), policy)
        if op.state == "PREPARED":
            return self._dispatch(job, key, op.attempt, need, action, digest, target,
                                  _claimed(key, op.attempt, token), policy)
        if op.state == "CONFIRMED":
            return Outcome(Ok("reuse_receipt"))
        if op.state in IN_FLIGHT:
            return Outcome(Ok("reconcile", "outcome_unknown" if op.state == "UNKNOWN" else "in_flight"))
        if op.state == "NEEDS_REVIEW":
            return Outcome(Ok("needs_review", "awaiting_editor"))
        if not op.retryable:
            return Outcome(Ok("halt", "failed_permanently"))
        if op.attempt >= op.max_attempts:
            return Outcome(Ok("halt", "retry_budget_exhausted"))
        return self._dispatch(job, key, op.attempt + 1, need, action, digest, target,
                              _claimed(key, op.attempt + 1, token), policy)

    def _dispatch(self, job, key, attempt, need, action, digest, target, claim, policy=None):
        spent = self.live_approval(job, action, digest, target, policy) if need else None
        index = self.approvals.index(spent) if spent is not None else None

        def apply(m):
            claim(m)
            m.jobs[job.name].dispatches += 1
            if index is not None:
                m.approvals[index].used = True
        return Outcome(Ok("dispatch", None, attempt), apply, (key, attempt))

    @staticmethod
    def _budget_used_up(job):
        limit = job.budgets.get("max_tool_calls")
        return limit is not None and job.dispatches >= limit

    @staticmethod
    def _max_attempts(job):
        return job.budgets.get("max_attempts") or 3


def _claimed(key, attempt, token):
    def apply(m):
        o = m.ops[key]
        o.state, o.attempt, o.token, o.reconciled_absent = "SENT", attempt, token, False
    return apply


def _then_all(*applies):
    def apply(m):
        for one in applies:
            if one is not None:
                one(m)
    return apply


def _then(verdict, key, after):
    def apply(m):
        if verdict:
            for k, v in verdict.items():
                setattr(m.ops[key], k, v)
        if after is not None:
            after(m)
    return apply
