"""Invariants under random histories (issue 22, build item 3): Hypothesis rule-based state
machines drive the ledger's HTTP API, both backends, and check after every step.

Rules are the API calls: create jobs (article and generic, budgets max_attempts and
max_tool_calls), take leases and take over (older tokens are kept and sent again), begin on the
single route and in batches (default keys, explicit keys, explicit keys equal to a computed
default, keys shared across jobs and repeated inside one batch, a begin repeated with its action,
target, payload or approval need changed), confirm, outcome, fail, unknown, lookup-result,
approve, deny, grant and revoke approvals, bump the version, cancel. A third of the single
begins and confirms carry the holder's heartbeat (some owner, live_s 0 or 3600), and so does a
handover (a confirm of an operation in flight under the token that dispatched it): the call's
own answer is unchanged, and unless it is a refusal the lease is renewed after it as by a
heartbeat, whose result the answer says (held, or lease_lost).

After every call the tables are read (stateful_checks.py: one dispatch per key and attempt, no
SENT without a live matching approval where one is needed, nothing under a stale token or after
a cancel, every refusal in the error shape, never a 5xx), then the answer is compared with the
model of the decision table (stateful_model.py), then the operation rows and the leases (token,
owner, live, working) with the model's.

Two machines: `InProcess` through the Flask test client, and `Served` through a real
`durable-ledger serve` (gunicorn, 2 workers x 4 threads), which adds a rule that races
concurrent begins of one key (single and batch, default and explicit keys, another payload, a
takeover) from threads: the answers must be those of some serial order of the racing items.

Profiles (`DURABLE_STATEFUL_PROFILE`): `ci` (default) and `long`; see docs/architecture.md.
"""

from collections import Counter
import os
import threading
import time
from datetime import datetime, timedelta, timezone
from urllib.parse import quote

import pytest
import requests
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule, run_state_machine_as_test

from peewee import fn

from conftest import TOKENS
from durable_ledger.app import create_app
from durable_ledger.kernel.config import Config
from durable_ledger.store.models import OperationEvent
from servers import LedgerServer
from stateful_checks import Violation, check_ledger, db_leases, db_operations, error_shape, lease_problem, \
    model_from_db, reset_tables, sync_problem
from stateful_model import CONFIRMABLE, RUNNER_NAME, ANY, Err, MApproval, MJob, Model, MOp, Ok, default_key, \
    digest_of, may_decide

PROFILES = {  # examples, steps per example: (in process, served)
    "ci": ((25, 25), (8, 20)),
    "long": ((400, 60), (60, 40)),
}
PROFILE = os.environ.get("DURABLE_STATEFUL_PROFILE", "ci")
# DURABLE_STATEFUL_STRICT=0: an answer the model does not expect is printed and the model rebuilt
# from the tables, so that a run keeps checking the invariants past a known divergence.
STRICT = os.environ.get("DURABLE_STATEFUL_STRICT", "1") != "0"
DIVERGED = Counter()
RACE_SPLITS = Counter()  # which order explained a lookup racing a takeover
CALLS = Counter()  # API calls made, by route (printed with -s)
POLICY_STEPS = Counter()  # begins naming a policy, and their answers (printed with -s)
BEATS = Counter()  # heartbeats carried by begins and confirms, by what the answer said (printed with -s)

JOBS = ("j0", "j1", "j2")
ACTIONS = ("publish", "set_status", "alias", "send")
TARGETS = (None, "site:a", "site:b")
PAYLOADS = ({"p": 1}, {"p": 2}, {"post_id": 9, "content_sha256": "ab" * 32})
DIGESTS = tuple(digest_of(p) for p in PAYLOADS)
SHARED_KEYS = ("acme:shared:1", "acme:shared:2")
RUNNER, APPROVER = "runner-token", "approver-token"
# Approvers with names and groups (issue 38): "rn" has the runner's name (the requester of every step).
DECIDERS = {APPROVER: ("bootstrap-acme-approver", ()), "ann-token": ("ann", ("legal",)),
            "ben-token": ("ben", ("editors",)), "rn-token": ("bootstrap-acme-runner", ("legal",))}
STATEFUL_TOKENS = TOKENS + ",acme:approver:ann-token:*:ann:legal,acme:approver:ben-token:*:ben:editors," \
                           "acme:approver:rn-token:*:bootstrap-acme-runner:legal"
POLICIES = (None, {"approvals_needed": 2, "approvers": [], "groups": [], "requester_may_approve": True},
            {"approvals_needed": 1, "approvers": [], "groups": ["legal"], "requester_may_approve": False},
            {"approvals_needed": 2, "approvers": ["ann", "ben", "bootstrap-acme-approver"], "groups": [],
             "requester_may_approve": True})
deciders = st.sampled_from(sorted(DECIDERS))
TTL = 86400  # leases never expire during an example: the model has no clock (a loaded machine took 120 s)
LATER = (datetime.now(timezone.utc) + timedelta(days=30)).isoformat()

# A begin as drawn: (job index, action, payload index, key choice, target, requires_approval, token age).
# Key choice: None (the default key), ("explicit", key), or ("computed", job index, action): an
# explicit key spelled like that job's default key for that action.
keys = st.one_of(st.none(), st.none(), st.tuples(st.just("explicit"), st.sampled_from(SHARED_KEYS)),
                 st.tuples(st.just("computed"), st.integers(0, 2), st.sampled_from(ACTIONS)))
ages = st.sampled_from((0, 0, 0, 0, 1, 2, -1))  # 0: the current token; n: n takeovers old; -1: never issued
begins = st.tuples(st.integers(0, 2), st.sampled_from(ACTIONS), st.integers(0, 2), keys, st.sampled_from(TARGETS),
                   st.sampled_from((False, False, False, True)), ages)
changes = st.sampled_from(("action", "target", "payload", "requires_approval", "computed_key", "same", "token",
                           "policy"))
# Inside a batch an item often repeats the previous one under the other spelling of its key.
batch_changes = st.sampled_from((None, None, "computed_key", "computed_key", "same", "payload", "action", "target",
                                 "requires_approval"))
# A heartbeat carried by a begin or a confirm (a third of them): (owner, live_s), or None. The
# owners are the heartbeat rule's, and "holder": the job's lease owner as the model has it (a
# Durable Step node beats as the holder; w1-w3 alone are mostly not it, so lease_lost).
beat_owners = st.sampled_from(("holder", "w1", "w2", "w3"))
beats = st.one_of(st.none(), st.none(), st.tuples(beat_owners, st.sampled_from((0, 3600))))
budgets = st.fixed_dictionaries({}, optional={"max_attempts": st.integers(1, 3), "max_tool_calls": st.integers(0, 4)})


class Driver:
    """Calls the API and returns (status, JSON body)."""

    def call(self, method, path, body=None, token=RUNNER):
        raise NotImplementedError


class ClientDriver(Driver):
    def __init__(self, client):
        self.client = client

    def call(self, method, path, body=None, token=RUNNER):
        r = self.client.open(path, method=method, json=body, headers={"Authorization": f"Bearer {token}"})
        return r.status_code, r.get_json(silent=True)


class HttpDriver(Driver):
    def __init__(self, url):
        self.url, self.local = url, threading.local()

    def call(self, method, path, body=None, token=RUNNER):
        session = getattr(self.local, "session", None) or requests.Session()
        self.local.session = session
        r = session.request(method, self.url + path, json=body, headers={"Authorization": f"Bearer {token}"},
                            timeout=60)
        try:
            return r.status_code, r.json()
        except ValueError:
            return r.status_code, {"raw": r.text[:300]}


def _raced_budget(kind, got, cancelling=False):
    """A begin that raced with the claim that used up the job's budget may read the budget after
    that claim committed and its key before it: it halts budget_exhausted instead of hearing the
    key's state. Both refuse, nothing is written or dispatched (the rows check and the
    one-dispatch invariant still see everything), so a race counts it as no effect.

    The same with a cancel racing (``cancelling``): the claim re-reads the job under its lock
    (gate/decide.py budget_refusal), so a begin that read "no row" before another begin's claim
    of its key committed, and the job after the cancel did, halts "cancelled" where every serial
    order answers from that row (another payload: 422 digest_mismatch):

        begin A (payload 1):  no row ... claim: job active, INSERT SENT (commit)
        begin B (payload 2):  no row .................................. claim: job cancelled: halt
        cancel:                                     status=cancelled (commit)"""
    halts = ("budget_exhausted",) + (("cancelled",) if cancelling else ())
    return kind in ("begin", "batch") and isinstance(got, Ok) and got.decision == "halt" and got.reason in halts


def _result(status, body):
    """What the model compares: Ok(decision, reason, attempt) for a gate answer, Ok() for another
    2xx, Err(status, code) for a refusal."""
    if status >= 400:
        return Err(status, body["error"]["code"])
    if isinstance(body, dict) and "decision" in body:
        op = body.get("operation") or {}
        return Ok(body["decision"], body.get("reason"), op.get("attempt") if body["decision"] == "dispatch" else None)
    return Ok()


def _epoch(iso):
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def _matches(expect, got):
    if isinstance(expect, Err):
        return isinstance(got, Err) and got.status == expect.status and expect.code in (ANY, got.code)
    if not isinstance(got, Ok):
        return False
    if expect.decision == "ok":
        return got.decision == "ok"
    return (got.decision, got.reason) == (expect.decision, expect.reason) and \
        (expect.attempt is None or got.attempt == expect.attempt)


class LedgerMachine(RuleBasedStateMachine):
    driver: Driver = None

    def __init__(self):
        super().__init__()
        reset_tables()
        self.model = Model()
        self.dispatched = set()  # (key, attempt) answered dispatch
        self.cancelled_sent = {}  # job -> SENT events when its cancel answered
        self.approval_ids = []  # the model's approvals, by index: their ids
        self.seen_event = 0
        self.last_begin = None
        self.settled = None  # the outcome the last `settle` matched
        self.violated = set()
        self.history = []

    # ---- plumbing --------------------------------------------------------------------------

    def call(self, method, path, body=None, token=RUNNER):
        CALLS[path.rsplit("/", 1)[-1] if path.startswith("/v1/operations/") else method + " " + path.split("/")[2]] += 1
        self.history.append(f"{method} {path} {body}")
        status, body = self.driver.call(method, path, body, token)
        error_shape(status, body)
        return status, body

    def settle(self, outcomes, status, body, what, sync=True):
        """Check the tables, then pick the model's outcome that matches the answer and apply it
        (``sync``: then compare the operation rows with the model's)."""
        self.check_tables()
        got = _result(status, body)
        self.note_dispatch(got, body)
        self.settled = None
        for out in outcomes:
            if _matches(out.expect, got):
                self.settled = out
                before = len(self.model.approvals)
                if out.apply is not None:
                    out.apply(self.model)
                self.note_approvals(before, body)
                if sync:
                    self.check_sync(what)
                return got
        problem = (f"model: {what} answered {got} ({str(body)[:400]}); the decision table says one of "
                   f"{[o.expect for o in outcomes]}")
        if STRICT:
            raise AssertionError(problem)
        self.diverged(problem, got)
        return got

    def diverged(self, problem, got):
        """Not strict: note the answer the model did not expect and go on from the tables."""
        kind = got.code if isinstance(got, Err) else f"{got.decision}/{got.reason}"
        DIVERGED[kind] += 1
        if DIVERGED[kind] == 1:
            print(problem)
        self.model, self.approval_ids = model_from_db(Model, MJob, MOp, MApproval, time.time())

    def note_dispatch(self, got, body):
        if isinstance(got, Ok) and got.decision == "dispatch":
            claim = (body["operation"]["operation_key"], got.attempt)
            if claim in self.dispatched:
                exc = Violation(f"one_dispatch: a second dispatch answer for {claim}")
                if STRICT:
                    raise exc
                print(f"VIOLATION {exc}\n  after: {self.history}")
            self.dispatched.add(claim)

    def note_approvals(self, before, body):
        for _ in range(len(self.model.approvals) - before):
            a = body.get("approval") or body
            self.approval_ids.append(a["id"])

    def check_tables(self, racing=False):
        tokens = None if racing else {n: j.token for n, j in self.model.jobs.items()}
        try:
            self.seen_event = check_ledger(self.cancelled_sent, tokens, self.seen_event)
        except Violation as exc:
            if STRICT:
                raise
            # Not strict: every distinct violation is printed once, with the history so far.
            name = str(exc).split(":")[0]
            if name not in self.violated:
                self.violated.add(name)
                print(f"VIOLATION {exc}\n  after: {self.history}")
            self.seen_event = max(self.seen_event, OperationEvent.select(fn.MAX(OperationEvent.id)).scalar() or 0)

    def check_sync(self, what):
        problem = sync_problem(self.model) or lease_problem(self.model)
        if problem and STRICT:
            raise AssertionError(f"model: after {what}, {problem}")
        if problem:
            self.diverged(problem, Err(0, "rows"))

    def job_name(self, i):
        names = sorted(self.model.jobs)
        return names[i % len(names)]

    def token(self, name, age):
        current = self.model.jobs[name].token if name in self.model.jobs else 1
        return current + 1 if age < 0 else max(1, current - age)

    def op_key(self, i):
        names = sorted(self.model.ops)
        return names[i % len(names)] if names else "acme:no-such-operation"

    # ---- jobs and leases -------------------------------------------------------------------

    @initialize(pipeline=st.sampled_from(("article", "generic")), budgets=budgets)
    def first_job(self, pipeline, budgets):
        self.create_job(0, pipeline, budgets)

    @precondition(lambda self: len(self.model.jobs) < len(JOBS))
    @rule(i=st.integers(0, 2), pipeline=st.sampled_from(("article", "generic")), budgets=budgets)
    def create_job(self, i, pipeline, budgets):
        name = next(n for n in JOBS[i:] + JOBS if n not in self.model.jobs)
        outs = self.model.create_job(name, pipeline, budgets)
        status, body = self.call("PUT", f"/v1/jobs/{name}", {"pipeline": pipeline, "budgets": budgets})
        self.settle(outs, status, body, f"create {name}")
        outs = self.model.lease(name, "w1", False)
        status, body = self.call("POST", f"/v1/jobs/{name}/lease", {"owner": "w1", "ttl_s": TTL})
        self.settle(outs, status, body, f"lease {name}")

    @rule(i=st.integers(0, 2), owner=st.sampled_from(("w1", "w2")), takeover=st.booleans())
    def lease(self, i, owner, takeover):
        name = self.job_name(i)
        outs = self.model.lease(name, owner, takeover)
        status, body = self.call("POST", f"/v1/jobs/{name}/lease", {"owner": owner, "takeover": takeover,
                                                                       "ttl_s": TTL})
        self.settle(outs, status, body, f"lease {name} {owner} takeover={takeover}")
        if status == 200:
            assert body["fencing_token"] == self.model.jobs[name].token, body

    # ---- liveness (issue 37): heartbeats, Start Job that waits for a working holder, release

    @rule(i=st.integers(0, 2), owner=st.sampled_from(("w1", "w2", "w3")), live_s=st.sampled_from((None, 0, 3600)))
    def start_if_live_wait(self, i, owner, live_s):
        name = self.job_name(i)
        j = self.model.jobs[name]
        outs = self.model.start(name, owner, live_s)
        body = {"owner": owner, "takeover": True, "if_live": "wait", "ttl_s": TTL, "task_version": j.version,
                "pipeline": j.pipeline}
        if live_s is not None:
            body["live_s"] = live_s
        status, answer = self.call("POST", f"/v1/jobs/{name}/start", body)
        self.settle(outs, status, answer, f"start {name} {owner} if_live=wait live_s={live_s}")
        if status == 200:
            assert answer["fencing_token"] == self.model.jobs[name].token, answer
            assert answer["holder_working"] is self.model.jobs[name].working, answer
        elif status == 409 and answer["error"]["code"] == "holder_live":
            assert answer["error"]["details"]["fencing_token"] == j.token, answer

    @rule(i=st.integers(0, 2), owner=st.sampled_from(("w1", "w2", "w3")), age=ages,
          live_s=st.sampled_from((None, 0, 3600)))
    def heartbeat(self, i, owner, age, live_s):
        name = self.job_name(i)
        token = self.token(name, age)
        outs = self.model.heartbeat(name, owner, token, live_s)
        body = {"owner": owner, "fencing_token": token, "ttl_s": TTL}
        if live_s is not None:
            body["live_s"] = live_s
        status, answer = self.call("POST", f"/v1/jobs/{name}/lease/renew", body)
        self.settle(outs, status, answer, f"heartbeat {name} {owner} token={token} live_s={live_s}")
        if status == 200:
            assert answer["holder_working"] is self.model.jobs[name].working, answer

    @rule(i=st.integers(0, 2), owner=st.sampled_from(("w1", "w2", "w3")), age=ages)
    def release(self, i, owner, age):
        name = self.job_name(i)
        token = self.token(name, age)
        outs = self.model.release(name, owner, token)
        status, answer = self.call("DELETE", f"/v1/jobs/{name}/lease", {"owner": owner, "fencing_token": token})
        self.settle(outs, status, answer, f"release {name} {owner} token={token}")

    @rule(i=st.integers(0, 2), age=ages)
    def bump_version(self, i, age):
        name = self.job_name(i)
        token = self.token(name, age)
        outs = self.model.bump_version(name, token)
        status, body = self.call("POST", f"/v1/jobs/{name}/versions", {"fencing_token": token})
        self.settle(outs, status, body, f"bump version of {name}")

    @rule(i=st.integers(0, 2))
    def cancel(self, i):
        name = self.job_name(i)
        outs = self.model.cancel(name)
        status, body = self.call("POST", f"/v1/jobs/{name}/cancel", {"reason": "stateful"})
        self.settle(outs, status, body, f"cancel {name}")
        if status == 200:
            self.cancelled_sent[name] = self.model.jobs[name].dispatches

    # ---- the gate --------------------------------------------------------------------------

    def begin_body(self, spec):
        ji, action, pi, key, target, requires_approval, age = spec
        name = self.job_name(ji)
        if key is not None and key[0] == "computed":
            other = self.job_name(key[1])
            key = default_key(other, self.model.jobs[other].version, key[2])
        elif key is not None:
            key = key[1]
        body = {"job_id": name, "action": action, "payload": PAYLOADS[pi], "fencing_token": self.token(name, age)}
        if key is not None:
            body["operation_key"] = key
        if target is not None:
            body["target"] = target
        if requires_approval:
            body["requires_approval"] = True
        return body

    def expect_begin(self, model, body):
        return model.begin(body["job_id"], body["action"], digest_of(body["payload"]), body.get("operation_key"),
                           body.get("target"), body.get("requires_approval", False), body["fencing_token"],
                           body.get("approval_policy"))

    def single_begin(self, body, beat=None):
        """POST /v1/operations/begin; ``beat``: the heartbeat it carries, (owner, live_s)."""
        self.last_begin = body
        outs = self.expect_begin(self.model, body)
        if beat is not None:
            beat = self.beat_of(body["job_id"], beat)
            outs = self.model.carrying(outs, body["job_id"], beat[0], body["fencing_token"], beat[1])
            body = {**body, "heartbeat": {"owner": beat[0], "live_s": beat[1]}}
        status, resp = self.call("POST", "/v1/operations/begin", body)
        self.settle(outs, status, resp, f"begin {body}")
        self.check_beat(resp, beat, f"begin {body}")

    def beat_of(self, name, beat):
        """(owner, live_s) with "holder" read as the job's lease owner in the model."""
        owner, live_s = beat
        if owner == "holder":
            owner = self.model.jobs[name].owner if name in self.model.jobs else "w1"
        return owner, live_s

    def check_beat(self, resp, beat, what):
        """The answer's heartbeat is what the model says of the one the call carried: none when it
        carried none or was refused; else held (live until live_s from the renew) or lease_lost."""
        out = self.settled
        if out is None:
            return  # not strict: the model did not expect the answer and was rebuilt
        got = resp.get("heartbeat") if isinstance(resp, dict) else None
        if out.beat is None:
            ok = got is None
        elif out.beat:
            # The renew happened between the request and now (one clock: the same machine).
            ok = isinstance(got, dict) and set(got) == {"held", "live_until"} and got["held"] is True \
                and -60 < _epoch(got["live_until"]) - beat[1] - time.time() <= 0.5
        else:
            ok = got == {"held": False, "code": "lease_lost"}
        if ok:
            BEATS["none" if beat is None else "refused" if out.beat is None else "held" if out.beat else "lost"] += 1
            return
        problem = f"model: {what} answered the heartbeat {got}; the model says held={out.beat}"
        if STRICT:
            raise AssertionError(problem)
        self.diverged(problem, Err(0, "heartbeat"))

    @rule(spec=begins, policy=st.sampled_from((0, 0, 0, 1, 2, 3)), beat=beats)
    def begin(self, spec, policy, beat=None):
        """A begin; half of them name who may approve the step (N of M, names, groups, not the
        runner that asked); a third carry the holder's heartbeat."""
        body = self.begin_body(spec)
        if POLICIES[policy] is not None:
            body["approval_policy"] = POLICIES[policy]
            POLICY_STEPS["begin"] += 1
        self.single_begin(body, beat)

    @precondition(lambda self: self.last_begin is not None)
    @rule(change=changes, pick=st.integers(0, 3), beat=beats)
    def begin_again(self, change, pick, beat):
        """The last begin again, one field changed (the issue's doors: same key, other facts)."""
        self.single_begin(self.changed(self.last_begin, change, pick), beat)

    def changed(self, body, change, pick):
        body = dict(body)
        name = body["job_id"]
        if name not in self.model.jobs:
            return body
        if change in ("action", "target", "payload", "requires_approval") and "operation_key" not in body:
            # keep the key the first begin used, so the change reaches the stored operation
            body["operation_key"] = default_key(name, self.model.jobs[name].version, body["action"])
        if change == "action":
            body["action"] = [a for a in ACTIONS if a != body["action"]][pick % 3]
        elif change == "target":
            others = [t for t in TARGETS if t != body.get("target")]
            body.pop("target", None)
            if others[pick % 2] is not None:
                body["target"] = others[pick % 2]
        elif change == "payload":
            body["payload"] = [p for p in PAYLOADS if p != body["payload"]][pick % 2]
        elif change == "requires_approval":
            if body.pop("requires_approval", False) is False:
                body["requires_approval"] = True
        elif change == "computed_key":
            if "operation_key" in body:
                body.pop("operation_key")
            else:
                body["operation_key"] = default_key(name, self.model.jobs[name].version, body["action"])
        elif change == "token":
            body["fencing_token"] = self.model.jobs[name].token
        elif change == "policy":
            body.pop("approval_policy", None)
            if POLICIES[pick % len(POLICIES)] is not None:
                body["approval_policy"] = POLICIES[pick % len(POLICIES)]
        return body

    @rule(items=st.lists(st.tuples(begins, batch_changes, st.integers(0, 3)), min_size=1, max_size=4),
          confirms=st.lists(st.tuples(st.integers(0, 7), ages, st.sampled_from(("r1", "r2"))), max_size=2))
    def batch(self, items, confirms):
        """POST /v1/operations/batch: confirms, then begins; an item with a change repeats the
        previous item of the batch with that change (a key repeated inside one batch)."""
        bodies = []
        for spec, change, pick in items:
            bodies.append(self.changed(bodies[-1], change, pick) if change and bodies else self.begin_body(spec))
        conf = []
        for oi, age, remote in confirms:
            key = self.op_key(oi)
            job = self.model.ops[key].job if key in self.model.ops else "j0"
            conf.append({"operation_key": key, "fencing_token": self.token(job, age), "remote_id": remote})
        status, resp = self.call("POST", "/v1/operations/batch", {"confirm": conf, "begin": bodies})
        self.check_tables()
        assert status == 200, resp
        for item, slot in zip(conf, resp["confirm"]):
            self.settle_slot(self.model.confirm(item["operation_key"], item["fencing_token"], item["remote_id"]), slot,
                             f"batch confirm {item}")
        for body, slot in zip(bodies, resp["begin"]):
            self.settle_slot(self.expect_begin(self.model, body), slot, f"batch begin {body} (batch {bodies})")
        if bodies:
            self.last_begin = bodies[-1]
        self.check_sync(f"batch {conf} {bodies}")

    def settle_slot(self, outs, slot, what):
        status = slot["error"]["http_status"] if "error" in slot else 200
        error_shape(status, slot, slot=True)
        self.settle(outs, status, slot, what, sync=False)

    # ---- outcomes --------------------------------------------------------------------------

    def op_call(self, verb, i, age, body):
        key = self.op_key(i)
        job = self.model.ops[key].job if key in self.model.ops else "j0"
        body = {"fencing_token": self.token(job, age), **body}
        status, resp = self.call("POST", f"/v1/operations/{quote(key, safe='')}/{verb}", body)
        return key, body["fencing_token"], status, resp

    @rule(i=st.integers(0, 7), age=ages, remote=st.sampled_from(("r1", "r2")), beat=beats)
    def confirm(self, i, age, remote, beat):
        """A receipt; a third carry the holder's heartbeat (the handover beat: renewed after the
        receipt is recorded, with the confirm's token, for the operation's job)."""
        key = self.op_key(i)
        job = self.model.ops[key].job if key in self.model.ops else "j0"
        self.confirm_with(key, self.token(job, age), remote, beat)

    # No precondition (see revoke): which operations are in flight depends on who won the races.
    @rule(i=st.integers(0, 7), remote=st.sampled_from(("r1", "r2")), owner=beat_owners,
          live_s=st.sampled_from((0, 3600)))
    def handover(self, i, remote, owner, live_s):
        """A Durable Step node's handover: the receipt of an operation in flight under the token
        that dispatched it (its own answer settles it even after a takeover, whose holder the
        beat then does not reach), carrying the heartbeat of a drawn owner."""
        flying = sorted(k for k, o in self.model.ops.items() if o.state in CONFIRMABLE)
        if not flying:
            return
        key = flying[i % len(flying)]
        self.confirm_with(key, self.model.ops[key].token, remote, (owner, live_s))

    def confirm_with(self, key, tok, remote, beat):
        body = {"fencing_token": tok, "remote_id": remote}
        outs = self.model.confirm(key, tok, remote)
        if beat is not None:
            op = self.model.ops.get(key)
            beat = self.beat_of(op.job if op else "j0", beat)
            body["heartbeat"] = {"owner": beat[0], "live_s": beat[1]}
            outs = self.model.carrying(outs, op.job if op else None, beat[0], tok, beat[1])
        status, resp = self.call("POST", f"/v1/operations/{quote(key, safe='')}/confirm", body)
        what = f"confirm {key} token {tok} remote {remote} heartbeat {beat}"
        self.settle(outs, status, resp, what)
        self.check_beat(resp, beat, what)

    @rule(i=st.integers(0, 7), age=ages, retryable=st.booleans())
    def fail(self, i, age, retryable):
        key, tok, status, resp = self.op_call("fail", i, age, {"retryable": retryable, "error": {"m": "x"}})
        self.settle(self.model.fail(key, tok, retryable), status, resp, f"fail {key} token {tok}")

    @rule(i=st.integers(0, 7), age=ages)
    def unknown(self, i, age):
        # the model is asked after the call: only `settle` changes it
        key, tok, status, resp = self.op_call("unknown", i, age, {})
        self.settle(self.model.unknown(key, tok), status, resp, f"unknown {key} token {tok}")

    OUTCOMES = {"ok": {"http_status": 201, "remote_id": "r1"}, "invalid": {"http_status": 422},
                "forbidden": {"http_status": 403}, "error": {"http_status": 500}, "timeout": {"error_kind": "timeout"}}

    @rule(i=st.integers(0, 7), age=ages, kind=st.sampled_from(sorted(OUTCOMES)))
    def outcome(self, i, age, kind):
        key, tok, status, resp = self.op_call("outcome", i, age, dict(self.OUTCOMES[kind]))
        self.settle(self.model.outcome(key, tok, kind, "r1"), status, resp, f"outcome {kind} {key} token {tok}")

    @rule(i=st.integers(0, 7), age=ages, result=st.sampled_from(("found", "absent", "absent", "undecidable")),
          stale_attempt=st.booleans())
    def lookup(self, i, age, result, stale_attempt):
        key = self.op_key(i)
        attempt = self.model.ops[key].attempt if key in self.model.ops else 1
        attempt = max(1, attempt - 1) if stale_attempt else attempt
        body = {"attempt": attempt, "result": result, **({"remote_id": "r2"} if result == "found" else {})}
        key, tok, status, resp = self.op_call("lookup-result", i, age, body)
        self.settle(self.model.lookup(key, tok, attempt, result, "r2"), status, resp,
                    f"lookup {result} attempt {attempt} {key} token {tok}")

    # ---- approvals -------------------------------------------------------------------------

    def decide(self, verb, i, right, extra, who=APPROVER):
        key = self.op_key(i)
        op = self.model.ops.get(key)
        digest = op.digest if op is not None and right else DIGESTS[i % 3]
        outs = (self.model.approve if verb == "approve" else self.model.deny)(key, digest, DECIDERS[who])
        status, resp = self.call("POST", f"/v1/operations/{quote(key, safe='')}/{verb}",
                                 {"content_digest": digest, **extra}, token=who)
        self.settle(outs, status, resp, f"{verb} {key} digest {digest[:8]} by {DECIDERS[who][0]}")

    @rule(i=st.integers(0, 7), right=st.sampled_from((True, True, True, False)), who=deciders)
    def approve(self, i, right, who):
        self.decide("approve", i, right, {}, who)

    @rule(i=st.integers(0, 7), right=st.sampled_from((True, True, True, False)), who=deciders)
    def deny(self, i, right, who):
        self.decide("deny", i, right, {"reason": "no"}, who)

    @rule(spec=begins, policy=st.integers(1, len(POLICIES) - 1),
          votes=st.lists(st.tuples(deciders, st.sampled_from(("approve", "approve", "approve", "deny"))),
                         min_size=1, max_size=3))
    def policy_round(self, spec, policy, votes):
        """A step begun under a policy, then decisions by several approvers, each followed by the
        same begin: it dispatches exactly when the policy has its count of live approvals."""
        self.begin(spec, policy)
        stored = {**POLICIES[policy], "requested_by": RUNNER_NAME}
        # First an approver the policy does not allow (another group, or the runner that asked
        # under its own name), whatever was drawn: refused, and never counted.
        outsider = next((t for t in sorted(DECIDERS) if not may_decide(stored, *DECIDERS[t])), None)
        for who, verb in ([(outsider, "approve")] if outsider else []) + votes:
            self.decide_last(who, verb)

    @precondition(lambda self: self.last_begin is not None)
    @rule(who=deciders, verb=st.sampled_from(("approve", "approve", "deny")))
    def decide_last(self, who, verb):
        """A decision on the last begin's operation, then that begin again: whether it dispatches
        now is the step's policy's count (N distinct allowed approvers, one allowed no stops it)."""
        body = self.last_begin
        job = self.model.jobs.get(body["job_id"])
        key = body.get("operation_key") or (default_key(body["job_id"], job.version, body["action"]) if job else None)
        if key in self.model.ops:
            self.decide(verb, sorted(self.model.ops).index(key), True, {"reason": "no"} if verb == "deny" else {}, who)
            self.single_begin(dict(body))
            POLICY_STEPS["decide_last" + ("" if "approval_policy" not in body else " under a policy")] += 1

    @rule(i=st.integers(0, 2), version=st.sampled_from((0, 0, -1, 1)), action=st.sampled_from(ACTIONS),
          pi=st.integers(0, 2), where=st.sampled_from(("site:a", "site:b")), who=deciders)
    def grant(self, i, version, action, pi, where, who):
        target = where
        """POST /v1/approvals: a grant for some binding (often not the one a begin will ask), by an
        approver a step's policy may or may not count."""
        name = self.job_name(i)
        version = max(1, self.model.jobs[name].version + version)
        outs = self.model.grant(name, version, action, DIGESTS[pi], target, DECIDERS[who])
        status, resp = self.call("POST", "/v1/approvals", {
            "job_id": name, "task_version": version, "action": action, "content_digest": DIGESTS[pi],
            "target": target, "expires_at": LATER}, token=who)
        self.settle(outs, status, resp, f"grant {name} v{version} {action} {target} by {DECIDERS[who][0]}")

    # No precondition: under races (ServedMachine) which grants succeeded depends on who won, and
    # a rule drawn or not on that makes Hypothesis' generation itself flaky
    # (FlakyStrategyDefinition: "the second run stopped drawing earlier than the first").
    @rule(i=st.integers(0, 7))
    def revoke(self, i):
        if not self.approval_ids:
            return
        index = i % len(self.approval_ids)
        outs = self.model.revoke(index)
        status, resp = self.call("DELETE", f"/v1/approvals/{self.approval_ids[index]}", token=APPROVER)
        self.settle(outs, status, resp, f"revoke approval {index}")


def _settings(kind):
    examples, steps = PROFILES[PROFILE][kind]
    # DURABLE_STATEFUL_SHRINK=0: report the first failing history as found (fast, long histories).
    shrink = os.environ.get("DURABLE_STATEFUL_SHRINK", "1") != "0"
    phases = [Phase.explicit, Phase.reuse, Phase.generate] + ([Phase.shrink] if shrink else [])
    return settings(max_examples=examples, stateful_step_count=steps, deadline=None, derandomize=PROFILE == "ci",
                    suppress_health_check=list(HealthCheck), report_multiple_bugs=False, print_blob=True,
                    phases=phases, database=None)


@pytest.fixture
def stateful_client(database):
    # No backoff: the model has no clock (backoff is row 2b of the table, tested in test_gate_decide.py).
    # The default lease TTL is the machine's: a carried heartbeat renews with it, and the model has
    # no clock (a lease renewed for 120 s could lapse within a slow example).
    cfg = Config(database_url=database, bootstrap_tokens=STATEFUL_TOKENS, log_level="WARNING", backoff_base_s=0.0,
                 default_lease_ttl_s=TTL)
    app = create_app(cfg)
    app.testing = True
    return app.test_client()


def test_stateful_in_process(stateful_client):
    machine = type("InProcess", (LedgerMachine,), {"driver": ClientDriver(stateful_client)})
    CALLS.clear()
    POLICY_STEPS.clear()
    BEATS.clear()
    run_state_machine_as_test(machine, settings=_settings(0))
    print(f"\nin process, {PROFILES[PROFILE][0]} examples x steps: calls {sum(CALLS.values())} {dict(CALLS)}; "
          f"policy steps {dict(POLICY_STEPS)}; carried heartbeats {dict(BEATS)}")


def interleavings(seqs):
    """Every merge of the sequences that keeps each one's order."""
    if not any(seqs):
        yield []
        return
    for i, seq in enumerate(seqs):
        if seq:
            for rest in interleavings(seqs[:i] + [seq[1:]] + seqs[i + 1:]):
                yield [seq[0]] + rest


RACERS = ("same", "same", "computed_key", "payload", "batch_pair", "takeover", "cancel")


class ServedMachine(LedgerMachine):
    """The same rules through a real server, plus races: concurrent requests from threads."""

    @rule(spec=begins, racers=st.lists(st.sampled_from(RACERS), min_size=1, max_size=2), beat=beats)
    def race(self, spec, racers, beat=None):
        """One begin and its racers at once: the same begin, the explicit key equal to the default
        one (or the reverse), another payload, a batch of both spellings, a takeover, a cancel. A
        third of the first begins carry the holder's heartbeat: a takeover or a cancel may land
        between its gate and its beat (the beat then is lease_lost and revives nothing)."""
        base = dict(self.begin_body(spec), fencing_token=self.token(self.job_name(spec[0]), 0))
        name = base["job_id"]
        calls = [("begin", [base])]
        for racer in racers:
            if racer in ("same", "computed_key", "payload"):
                calls.append(("begin", [self.changed(base, racer, 0) if racer != "same" else dict(base)]))
            elif racer == "batch_pair":
                calls.append(("batch", [dict(base), self.changed(base, "computed_key", 0)]))
            else:
                calls.append((racer, [name]))
        if beat is not None:
            owner, live_s = self.beat_of(name, beat)
            calls[0] = ("begin", [{**base, "heartbeat": {"owner": owner, "live_s": live_s}}])
        results = self.run_together(calls)
        self.check_tables(racing=True)
        self.linearize(calls, results)
        for kind, args in calls:
            if kind == "cancel":
                self.cancelled_sent[name] = self.model.jobs[name].dispatches

    # The race is what this machine adds: drawn three times as often as any other rule.
    @rule(spec=begins, racers=st.lists(st.sampled_from(RACERS), min_size=1, max_size=2), beat=beats)
    def race_again(self, spec, racers, beat):
        self.race(spec, racers, beat)

    @rule(spec=begins, racers=st.lists(st.sampled_from(RACERS), min_size=1, max_size=2), beat=beats)
    def race_once_more(self, spec, racers, beat):
        self.race(spec, racers, beat)

    # No precondition: which operations are in flight depends on who won earlier races, and rules
    # that are drawn or not on that would make Hypothesis' generation itself flaky.
    @rule(i=st.integers(0, 7), result=st.sampled_from(("absent", "found")))
    def race_lookup_takeover(self, i, result):
        """Issue 22 item 12: the owner's lookup-result racing a takeover. lookup-result is two
        transactions (the verdict, then the gate), so a takeover can fall between them: the report
        is then applied and its answer is 409 stale_fencing_token."""
        flying = sorted(k for k, o in self.model.ops.items() if o.state in ("SENT", "UNKNOWN"))
        if not flying:
            return
        key = flying[i % len(flying)]
        op = self.model.ops[key]
        name, token, attempt = op.job, self.model.jobs[op.job].token, op.attempt
        body = {"fencing_token": token, "attempt": attempt, "result": result, "remote_id": "r3"}
        calls = [("lookup", [(key, body)]), ("takeover", [name])]
        results = self.run_together(calls)
        self.check_tables(racing=True)
        (l_status, l_body), (t_status, t_body) = results[0][0], results[1][0]
        got_l, got_t = _result(l_status, l_body), _result(t_status, t_body)
        rows = db_operations()
        for split in ("lookup first", "takeover first", "takeover between"):
            m = self.model.clone()
            if split == "takeover between":
                fields = m.verdict(key, token, attempt, result, "r3")
                if not isinstance(fields, dict):
                    continue
                for k, v in fields.items():
                    setattr(m.ops[key], k, v)
            steps = [("takeover", got_t), ("lookup", got_l)] if split != "lookup first" else \
                [("lookup", got_l), ("takeover", got_t)]
            for kind, got in steps:
                if kind == "takeover":
                    outs = m.lease(name, "w3", True)
                elif split == "takeover between":
                    o = m.ops[key]
                    outs = m.begin(o.job, o.action, o.digest, key, o.target, o.requires_approval, token)
                else:
                    outs = m.lookup(key, token, attempt, result, "r3")
                out = next((x for x in outs if _matches(x.expect, got)), None)
                if out is None:
                    break
                if out.apply is not None:
                    out.apply(m)
            else:
                if sync_problem(m, rows) is None:
                    RACE_SPLITS[split] += 1
                    self.model = m
                    break
        else:
            problem = f"model: lookup {result} of {key} racing a takeover answered {got_l}, {got_t}: no order explains"
            if STRICT:
                raise AssertionError(problem + f"; rows: {sync_problem(self.model, rows)}")
            self.diverged(problem, Err(0, "race"))
        self.note_dispatch(got_l, l_body)

    def run_together(self, calls):
        barrier = threading.Barrier(len(calls))
        results = [None] * len(calls)

        def one(i):
            kind, args = calls[i]
            barrier.wait()
            if kind == "begin":
                results[i] = [self.call("POST", "/v1/operations/begin", args[0])]
            elif kind == "batch":
                status, body = self.call("POST", "/v1/operations/batch", {"begin": args})
                assert status == 200, body
                slots = []
                for slot in body["begin"]:
                    code = slot["error"]["http_status"] if "error" in slot else 200
                    error_shape(code, slot, slot=True)
                    slots.append((code, slot))
                results[i] = slots
            elif kind == "lookup":
                key, body = args[0]
                results[i] = [self.call("POST", f"/v1/operations/{quote(key, safe='')}/lookup-result", body)]
            elif kind == "takeover":
                results[i] = [self.call("POST", f"/v1/jobs/{args[0]}/lease", {"owner": "w3", "takeover": True,
                                                                                          "ttl_s": TTL})]
            else:
                results[i] = [self.call("POST", f"/v1/jobs/{args[0]}/cancel", {"reason": "race"})]

        threads = [threading.Thread(target=one, args=(i,)) for i in range(len(calls))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert all(r is not None for r in results), f"a racing call did not finish: {calls}"
        return results

    def beat_explained(self, m, body, answer):
        """Whether the heartbeat a racing begin carried is what the model ``m`` says at this point
        of a serial order (then applied to it): none after a refusal, else the renew's result."""
        status, resp = answer
        hb = resp.get("heartbeat") if isinstance(resp, dict) else None
        if status >= 400:
            return hb is None
        beat = body["heartbeat"]
        renew = m.heartbeat(body["job_id"], beat["owner"], body["fencing_token"], beat["live_s"])[0]
        held = isinstance(renew.expect, Ok)
        if not isinstance(hb, dict) or hb.get("held") is not held:
            return False
        if renew.apply is not None:
            renew.apply(m)
        return True

    def expect(self, model, kind, arg):
        if kind in ("begin", "batch"):
            return self.expect_begin(model, arg)
        if kind == "takeover":
            return model.lease(arg, "w3", True)
        return model.cancel(arg)

    def linearize(self, calls, results):
        """The answers must be those of some serial order of the racing items (409 gate_contended
        counts as no effect), and the rows and leases what that order leaves."""
        seqs = [[(kind, arg, res) for arg, res in zip(args, rs)] for (kind, args), rs in zip(calls, results)]
        # A cancel is two transactions (jobs/lifecycle.py: the job, then its lease, so that it never
        # waits for the lease while holding the job): a takeover can land between them and get a
        # lease that the cancel's second transaction expires.
        seqs = [seq + [("cancel_lease", seq[0][1], None)] if seq and seq[0][0] == "cancel" else seq for seq in seqs]
        # A begin's carried heartbeat is renewed after the begin's own work: an item of its own.
        seqs = [seq + [("beat", seq[0][1:], None)] if seq and seq[0][0] == "begin" and "heartbeat" in seq[0][1] else seq
                for seq in seqs]
        rows, leases = db_operations(), db_leases()
        cancelling = any(kind == "cancel" for kind, _ in calls)
        explained, found, rows_only, m = False, None, None, None
        for order in interleavings(seqs):
            m = self.model.clone()
            for kind, arg, answer in order:
                if kind == "cancel_lease":
                    if arg in m.jobs:
                        m.jobs[arg].live = m.jobs[arg].working = False
                    continue
                if kind == "beat":
                    if not self.beat_explained(m, *arg):
                        break
                    continue
                got = _result(*answer)
                if got == Err(409, "gate_contended") or _raced_budget(kind, got, cancelling):
                    continue
                out = next((o for o in self.expect(m, kind, arg) if _matches(o.expect, got)), None)
                if out is None:
                    break
                lease_now = (m.jobs[arg].live, m.jobs[arg].working) if kind == "cancel" and arg in m.jobs else None
                if out.apply is not None:
                    out.apply(m)
                if lease_now is not None:
                    # The cancel's job transaction: its lease lives on until its "cancel_lease"
                    # (a begin halted "cancelled" in between may still land its heartbeat).
                    m.jobs[arg].live, m.jobs[arg].working = lease_now
            else:
                explained = True
                if sync_problem(m, rows) is None:
                    # Racing takeovers, leases and cancels can leave the same operation rows in
                    # orders that hand out different tokens: the order must leave the leases too.
                    if lease_problem(m, leases) is None:
                        found = m
                        break
                    rows_only = rows_only or m
        if found is not None:
            self.model = found
        else:
            if rows_only is not None:
                problem = f"model: no serial order of {calls} leaves the leases: {lease_problem(rows_only, leases)}"
            elif not explained:
                problem = (f"model: no serial order of {calls} explains the answers "
                           f"{[[_result(s, b) for s, b in r] for r in results]}")
            else:
                problem = f"model: the rows after {calls} are not what any serial order leaves: {sync_problem(m, rows)}"
            if STRICT:
                raise AssertionError(problem)
            self.diverged(problem, Err(0, "race"))
        for (status, body) in (x for r in results for x in r):
            self.note_dispatch(_result(status, body), body)
        if "heartbeat" in calls[0][1][0]:
            hb = results[0][0][1].get("heartbeat")
            BEATS["race " + ("refused" if hb is None else "held" if hb["held"] else "lost")] += 1


@pytest.fixture
def served(database, tmp_path):
    srv = LedgerServer(database, STATEFUL_TOKENS, workers=2, threads=4, log_path=tmp_path / "ledger.log")
    srv.env["DURABLE_BACKOFF_BASE_S"] = "0"
    srv.env["DURABLE_LEASE_TTL_S"] = str(TTL)  # a carried heartbeat's TTL: see stateful_client
    with srv:
        yield srv.url


def test_stateful_served(served):
    machine = type("Served", (ServedMachine,), {"driver": HttpDriver(served)})
    CALLS.clear()
    RACE_SPLITS.clear()
    BEATS.clear()
    run_state_machine_as_test(machine, settings=_settings(1))
    print(f"\nserved, {PROFILES[PROFILE][1]} examples x steps: calls {sum(CALLS.values())} {dict(CALLS)}; "
          f"lookup/takeover orders {dict(RACE_SPLITS)}; carried heartbeats {dict(BEATS)}")


# ---- the shortest histories the machines found (stateful-findings.md), kept as regular tests ----

def _replay(client, *calls):
    """Run (method, path, body[, token]) calls through the client; the answers, each checked for
    the error shape, then the invariants on the tables."""
    driver, out = ClientDriver(client), []
    for method, path, body, *token in calls:
        status, resp = driver.call(method, path, body, *(token or [RUNNER]))
        error_shape(status, resp)
        out.append(_result(status, resp))
    check_ledger({})
    return out


def _job(pipeline, name="j0"):
    return [("PUT", f"/v1/jobs/{name}", {"pipeline": pipeline}), ("POST", f"/v1/jobs/{name}/lease", {"owner": "w1"})]


BEGIN = "/v1/operations/begin"


def test_stateful_history_publish_renamed_is_refused(stateful_client):
    """F1: a PREPARED `publish` of an article job begun again under its key as `set_status`."""
    publish = {"job_id": "j0", "action": "publish", "payload": {"p": 1}, "fencing_token": 1}
    got = _replay(stateful_client, *_job("article"), ("POST", BEGIN, publish),
                  ("POST", BEGIN, {**publish, "action": "set_status", "operation_key": "acme:j0:v1:publish"}))
    assert got[2:] == [Ok("halt", "approval_required"), Err(422, "action_mismatch")]


def test_stateful_history_approval_need_never_lowered(stateful_client):
    """F1: a generic step first begun with requires_approval, then without."""
    send = {"job_id": "j0", "action": "send", "payload": {"p": 1}, "fencing_token": 1, "requires_approval": True}
    got = _replay(stateful_client, *_job("generic"), ("POST", BEGIN, send),
                  ("POST", BEGIN, {k: v for k, v in send.items() if k != "requires_approval"}))
    assert got[2:] == [Ok("halt", "approval_required")] * 2


def test_stateful_history_target_changed_to_an_approved_one_is_refused(stateful_client):
    """F1: a PREPARED publish without a target, an approval granted for another target, the same
    key begun with that target."""
    publish = {"job_id": "j0", "action": "publish", "payload": {"p": 1}, "fencing_token": 1}
    grant = {"job_id": "j0", "task_version": 1, "action": "publish", "content_digest": digest_of({"p": 1}),
             "target": "site:b", "expires_at": LATER}
    got = _replay(stateful_client, *_job("article"), ("POST", BEGIN, publish),
                  ("POST", "/v1/approvals", grant, APPROVER),
                  ("POST", BEGIN, {**publish, "operation_key": "acme:j0:v1:publish", "target": "site:b"}))
    assert got[2:] == [Ok("halt", "approval_required"), Ok(), Err(422, "target_mismatch")]


def test_stateful_history_batch_names_one_key_twice(stateful_client):
    """F2: one batch, two items for the same computed key (default and explicit), then the same
    with another payload in the second item, then one explicit key for two jobs."""
    item = {"job_id": "j0", "action": "alias", "payload": {"p": 1}, "fencing_token": 1}
    same = {**item, "operation_key": "acme:j0:v1:alias"}
    other = {**item, "action": "send"}
    shared = {"job_id": "j1", "action": "x", "payload": {"p": 1}, "fencing_token": 1, "operation_key": "acme:s"}
    driver = ClientDriver(stateful_client)
    for call in _job("generic") + _job("generic", "j1"):
        driver.call(*call)
    answers = []
    for begins_ in ([item, same], [other, {**other, "operation_key": "acme:j0:v1:send", "payload": {"p": 2}}],
                    [shared, {**shared, "job_id": "j0"}]):
        status, body = driver.call("POST", "/v1/operations/batch", {"begin": begins_})
        assert status == 200, body
        for slot in body["begin"]:
            error_shape(slot["error"]["http_status"] if "error" in slot else 200, slot, slot="error" in slot)
        answers.append([_result(slot["error"]["http_status"], slot) if "error" in slot else _result(200, slot)
                        for slot in body["begin"]])
        check_ledger({})
    assert answers == [[Ok("dispatch", None, 1), Ok("reconcile", "in_flight")],
                       [Ok("dispatch", None, 1), Err(422, "digest_mismatch")],
                       [Ok("dispatch", None, 1), Err(422, "job_mismatch")]]


def test_stateful_history_prepare_lost_to_another_payload(stateful_client, monkeypatch):
    """F4: a begin of a publish decides "no row: prepare" while another payload's begin of the same
    key prepares first (run here inside `store.insert_prepared`, deterministically)."""
    from durable_ledger import store
    from durable_ledger.auth import Principal
    from durable_ledger import gate

    real, raced = store.insert_prepared, []

    def racing(new, detail):
        if not raced:  # the first PREPARE: the other payload's begin gets there first
            raced.append(None)
            raced[0] = gate.begin(Principal("acme", "runner", "test"), "j0", "publish", 1, payload={"p": 1})
        return real(new, detail)

    _replay(stateful_client, *_job("article"))
    monkeypatch.setattr(store, "insert_prepared", racing)
    got = _replay(stateful_client, ("POST", BEGIN, {"job_id": "j0", "action": "publish", "payload": {"p": 2},
                                                    "fencing_token": 1}))
    assert raced[0].reason == "approval_required"
    assert got == [Err(422, "digest_mismatch")]
