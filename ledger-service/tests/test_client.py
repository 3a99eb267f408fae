"""The client API's contract, once, for both transports on both databases.

`ledger` is a LocalLedger (the core in this process) or an HttpLedger (a real `serve`)
on the same database; `other` is the other transport on that database, so a run on one and the
next run on the other prove the two share one gate and one set of tables. Exactly-once is shown
by counts: how often a body ran, and the operation rows and their SENT events in the tables.

The server is started once per database (module scope; jobs get unique ids instead of emptying
the tables between tests): starting one per test would cost more than the tests themselves.
"""

import subprocess
import sys
import threading
import uuid
from collections import Counter
from types import SimpleNamespace

import pytest
import requests

from conftest import TOKENS
from durable_ledger.auth import Principal
from durable_ledger.client import (ConfirmForgotten, Halted, HttpLedger, LedgerError, LedgerUnavailable, LocalLedger,
                                   NeedsReconcile, NotSent, StaleFencingToken, StepBlocked, StepUsageError,
                                   split_result)
from durable_ledger.client.errors import error_from_http
from durable_ledger.jobs import lifecycle
from durable_ledger.kernel.errors import DigestMismatch, InvalidValue, MalformedJson, ValidationFailed
from durable_ledger.store.db import db
from durable_ledger.store.models import AuditLog, Job, Operation, OperationEvent
from servers import LedgerServer

H = {"Authorization": "Bearer runner-token"}
SECRET = "sk-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4"


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def stack(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("client")
    url = f"sqlite:///{tmp / 'ledger.db'}" if request.param == "sqlite" else request.getfixturevalue("pg_url")
    LocalLedger(url, tenant="acme", actor="probe").close()  # binds and migrates, as the server will
    with LedgerServer(url, TOKENS, workers=2, threads=4, log_path=tmp / "ledger.log") as server:
        yield SimpleNamespace(url=url, server=server.url)


def make(stack, transport, actor="test"):
    if transport == "local":
        return LocalLedger(stack.url, tenant="acme", actor=actor)
    return HttpLedger(stack.server, token="runner-token")


@pytest.fixture(params=["local", "http"])
def transport(request):
    return request.param


@pytest.fixture
def ledger(stack, transport):
    LocalLedger(stack.url, tenant="acme", migrate=False)  # this process reads the tables of this stack
    client = make(stack, transport)
    yield client
    client.close()


@pytest.fixture
def other(stack, transport):
    client = make(stack, "http" if transport == "local" else "local", actor="other")
    yield client
    client.close()


def jid(name):
    return f"{name}-{uuid.uuid4().hex[:8]}"


def rows(job_id):
    """(state, attempt, remote_id) of the job's operations, read from the table itself."""
    with db.connection_context():
        q = (Operation.select(Operation.state, Operation.attempt, Operation.remote_id)
             .join(Job).where(Job.tenant == "acme", Job.job_id == job_id).order_by(Operation.id))
        return [(o.state, o.attempt, o.remote_id) for o in q]


def sent_events(job_id):
    """How many times the gate moved one of the job's operations to SENT (= dispatches)."""
    with db.connection_context():
        return (OperationEvent.select().join(Job).where(Job.job_id == job_id, OperationEvent.to_state == "SENT")
                .count())


def last_error(job_id):
    with db.connection_context():
        return Operation.select().join(Job).where(Job.job_id == job_id).order_by(Operation.id.desc()).get().last_error


def refusals(code):
    with db.connection_context():
        return AuditLog.select().where(AuditLog.action == f"refused:{code}").count()


class Body:
    """A side effect that counts its calls."""

    def __init__(self, fail_with=None):
        self.calls, self.fail_with = 0, fail_with

    def __call__(self):
        self.calls += 1
        if self.fail_with is not None:
            raise self.fail_with
        return str(40 + self.calls)


def run(job, body, action="create_draft", payload=None, **kw):
    """One run of a step, as agent code writes it; returns the receipt."""
    with job.step(action, payload if payload is not None else {"title": "T"}, **kw) as step:
        if step.done:
            return step.receipt
        remote_id = body()
        step.confirm(remote_id=remote_id, receipt={"id": int(remote_id)})
    return {"remote_id": remote_id, "id": int(remote_id)}


def test_dispatch_confirm_then_every_later_run_reuses_the_receipt(ledger, other):
    job_id, body = jid("reuse"), Body()
    job = ledger.job(job_id, owner="worker-a", ttl_s=60)
    assert job.fencing_token == 1 and job.created
    assert run(job, body) == {"remote_id": "41", "id": 41}
    # The next run is another worker that took over (a restart), then one on the other transport.
    second = ledger.job(job_id, owner="worker-b", takeover=True)
    assert second.fencing_token == 2 and not second.created
    assert run(second, body) == {"remote_id": "41", "id": 41}
    third = other.job(job_id, owner="worker-c", takeover=True)
    assert third.fencing_token == 3
    assert run(third, body) == {"remote_id": "41", "id": 41}
    assert body.calls == 1
    assert rows(job_id) == [("CONFIRMED", 1, "41")] and sent_events(job_id) == 1
    with third.step("create_draft", {"title": "T"}) as step:
        assert (step.done, step.decision, step.attempt) == (True, "reuse_receipt", 1)
        with pytest.raises(StepUsageError):
            step.confirm("99")


def test_exception_in_the_body_records_unknown_and_blocks_the_next_run(ledger, other):
    job_id, body = jid("unknown"), Body(fail_with=TimeoutError(f"read timed out; sent Bearer {SECRET}"))
    job = ledger.job(job_id, owner="worker-a")
    with pytest.raises(TimeoutError):
        run(job, body)
    assert rows(job_id) == [("UNKNOWN", 1, None)]
    error = last_error(job_id)
    assert error["type"] == "TimeoutError" and SECRET not in str(error) and "[redacted]" in error["message"]
    for client in (ledger, other):
        with pytest.raises(NeedsReconcile) as blocked:
            run(client.job(job_id, owner="worker-b", takeover=True), body)
        assert isinstance(blocked.value, StepBlocked)
        assert (blocked.value.decision, blocked.value.reason) == ("reconcile", "outcome_unknown")
        assert blocked.value.operation_key == f"acme:{job_id}:v1:create_draft" and blocked.value.message
    assert body.calls == 1 and sent_events(job_id) == 1 and rows(job_id) == [("UNKNOWN", 1, None)]


def test_not_sent_records_failed_and_the_next_run_dispatches_attempt_two(ledger, other):
    job_id, body = jid("notsent"), Body(fail_with=NotSent("connection refused before sending"))
    job = ledger.job(job_id, owner="worker-a")
    with pytest.raises(NotSent):
        run(job, body)
    assert rows(job_id) == [("FAILED", 1, None)]
    assert last_error(job_id)["type"] == "NotSent"
    body.fail_with = None
    retry = other.job(job_id, owner="worker-b", takeover=True)
    with retry.step("create_draft", {"title": "T"}) as step:
        assert (step.done, step.attempt) == (False, 2)
        step.confirm(body(), {"id": 42})
    assert body.calls == 2 and sent_events(job_id) == 2
    assert rows(job_id) == [("CONFIRMED", 2, "42")]
    assert run(ledger.job(job_id, owner="worker-c", takeover=True), body)["remote_id"] == "42"
    assert body.calls == 2


def test_explicit_fail_not_retryable_halts_the_next_run(ledger):
    job_id, body = jid("fail"), Body()
    job = ledger.job(job_id, owner="worker-a")
    with job.step("create_draft", {"title": "T"}) as step:
        step.fail(retryable=False, error={"http_status": 400, "message": "bad title"})
    assert rows(job_id) == [("FAILED", 1, None)]
    with pytest.raises(Halted) as blocked:
        run(job, body)
    assert (blocked.value.decision, blocked.value.reason) == ("halt", "failed_permanently")
    assert body.calls == 0 and sent_events(job_id) == 1


def test_a_forgotten_confirm_is_recorded_unknown_and_raised(ledger):
    job_id = jid("forgot")
    job = ledger.job(job_id, owner="worker-a")
    with pytest.raises(ConfirmForgotten):
        with job.step("create_draft", {"title": "T"}) as step:
            assert not step.done
    assert rows(job_id) == [("UNKNOWN", 1, None)] and last_error(job_id)["type"] == "ConfirmForgotten"
    with pytest.raises(NeedsReconcile):
        run(job, Body())


def test_the_attempts_own_confirm_after_a_takeover_settles_it_and_a_stale_begin_is_refused_on_both_transports(
        ledger, other):
    job_id, body = jid("stale"), Body()
    old = ledger.job(job_id, owner="worker-a")
    before = refusals("stale_fencing_token")
    with old.step("create_draft", {"title": "T"}) as step:
        body()  # the side effect happens, then another worker takes over before the confirm
        new = other.job(job_id, owner="worker-b", takeover=True)
        step.confirm("41", {"id": 41})  # the answer of the attempt it dispatched: it settles the step
    assert rows(job_id) == [("CONFIRMED", 1, "41")]
    with pytest.raises(StaleFencingToken) as refused:  # a begin with the old token: refused before the body
        run(old, body, action="set_seo")
    exc = refused.value
    assert isinstance(exc, LedgerError) and (exc.code, exc.http_status) == ("stale_fencing_token", 409)
    assert run(new, body)["remote_id"] == "41"  # the new worker reads the receipt, it does not repeat
    assert body.calls == 1 and sent_events(job_id) == 1 and rows(job_id) == [("CONFIRMED", 1, "41")]
    assert refusals("stale_fencing_token") - before == 1  # the begin, counted on both


def test_a_cancelled_job_halts_before_the_body(stack, ledger, transport):
    job_id, body = jid("cancel"), Body()
    job = ledger.job(job_id, owner="worker-a")
    if transport == "local":  # cancelled through the other door: the HTTP route, or the core
        requests.post(f"{stack.server}/v1/jobs/{job_id}/cancel", headers=H, json={"reason": "stop"}).raise_for_status()
    else:
        with db.connection_context():
            lifecycle.cancel_job(Principal("acme", "runner", "test"), job_id, "stop")
    with pytest.raises(Halted) as blocked:
        run(job, body)
    assert (blocked.value.decision, blocked.value.reason, blocked.value.operation_key) == ("halt", "cancelled", None)
    assert body.calls == 0 and rows(job_id) == []
    assert ledger.cancel(job_id, "again")["already_cancelled"] is True


def test_approval_required_halts_and_prepares(ledger):
    job_id, body = jid("approval"), Body()
    job = ledger.job(job_id, owner="worker-a")
    with pytest.raises(Halted) as blocked:
        run(job, body, action="publish", requires_approval=True, target="wordpress:test")
    assert blocked.value.reason == "approval_required"
    assert body.calls == 0 and rows(job_id) == [("PREPARED", 1, None)] and sent_events(job_id) == 0


def test_the_decorator_runs_once_per_key_and_returns_one_shape(ledger, other):
    job_id, sent = jid("gated"), Counter()
    job = ledger.job(job_id, owner="worker-a")

    @job.gated("send_email", key=lambda to, subject: f"email:{job_id}:{to}:{subject}")
    def send_email(to, subject):
        sent[to] += 1
        return f"msg-{to}", {"to": to}

    first = send_email("a@example.com", "hi")
    assert first == {"remote_id": "msg-a@example.com", "to": "a@example.com"}
    assert send_email("a@example.com", "hi") == first
    send_email("b@example.com", subject="hi")
    rerun = other.job(job_id, owner="worker-b", takeover=True)
    again = rerun.gated("send_email", key=lambda to, subject: f"email:{job_id}:{to}:{subject}")(send_email.__wrapped__)
    assert again("a@example.com", "hi") == first
    assert sent == {"a@example.com": 1, "b@example.com": 1}
    assert rows(job_id) == [("CONFIRMED", 1, "msg-a@example.com"), ("CONFIRMED", 1, "msg-b@example.com")]
    assert sent_events(job_id) == 2

    @rerun.gated("create_post", key="post-" + job_id)
    def broken():
        return None  # ran, but says nothing about what it created: recorded UNKNOWN

    with pytest.raises(TypeError):
        broken()
    assert rows(job_id)[-1] == ("UNKNOWN", 1, None)


def test_split_result_shapes():
    assert split_result(("7", {"a": 1})) == ("7", {"a": 1})
    assert split_result({"remote_id": 7, "a": 1}) == (7, {"a": 1})
    assert split_result(SimpleNamespace(remote_id="7", receipt={"a": 1})) == ("7", {"a": 1})
    assert split_result("7") == ("7", {})
    for bad in (None, True, {"id": 7}, ("", {}), ("7", "receipt")):
        with pytest.raises(TypeError):
            split_result(bad)


def test_threads_share_one_ledger_and_a_contended_step_runs_once(stack, ledger, transport):
    job_id, lock, calls = jid("threads"), threading.Lock(), Counter()
    job = ledger.job(job_id, owner="worker-a")
    barrier, outcomes = threading.Barrier(8), Counter()

    def worker(i):
        barrier.wait()
        for k in range(4):  # own steps: each runs once
            with job.step("own", {"i": i, "k": k}, operation_key=f"{job_id}:own:{i}:{k}") as step:
                step.confirm(f"{i}-{k}")
        try:  # everyone races for the same step
            with job.step("shared", {"x": 1}) as step:
                if step.done:
                    outcomes["reused"] += 1
                    return
                with lock:
                    calls["shared"] += 1
                step.confirm("shared-1")
                outcomes["dispatched"] += 1
        except NeedsReconcile:
            outcomes["reconcile"] += 1
        finally:
            ledger.close()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls["shared"] == 1 and outcomes["dispatched"] == 1 and sum(outcomes.values()) == 8
    states = Counter(state for state, _, _ in rows(job_id))
    assert states == {"CONFIRMED": 33} and sent_events(job_id) == 33
    if transport == "local" and hasattr(db.obj, "_in_use"):  # pooled: every thread handed its connection back
        assert len(db.obj._in_use) == 0


def test_the_same_inputs_are_refused_with_the_same_classes(ledger):
    job_id = jid("limits")
    with pytest.raises(ValidationFailed):
        ledger.job("a/b", owner="w")
    with pytest.raises(ValidationFailed):
        ledger.job(job_id, owner="w", colour="blue")
    job = ledger.job(job_id, owner="worker-a")
    with pytest.raises(InvalidValue):
        run(job, Body(), payload={"n": float("nan")})
    with pytest.raises(InvalidValue):
        run(job, Body(), payload={"s": "nul\x00"})
    with pytest.raises(MalformedJson):
        deep = {}
        for _ in range(70):
            deep = {"d": deep}
        run(job, Body(), payload=deep)
    assert rows(job_id) == []  # nothing was claimed by a refused begin
    run(job, Body())
    with pytest.raises(DigestMismatch):
        run(job, Body(), payload={"title": "other"})
    with pytest.raises(ValidationFailed) as too_big:
        with job.step("upload", {"f": 1}) as step:
            step.confirm("1", {"blob": "x" * 70_000})
    assert too_big.value.details["max_bytes"] == 65536
    with pytest.raises(ValidationFailed):
        with job.step("upload2", {"f": 1}) as step:
            step.confirm("x" * 256)
    assert [s for s, _, _ in rows(job_id)] == ["CONFIRMED", "UNKNOWN", "UNKNOWN"]


def test_http_errors_map_back_to_the_ledgers_classes():
    stale = error_from_http(409, {"error": {"code": "stale_fencing_token", "message": "m", "details": {"current": 2}}})
    assert type(stale) is StaleFencingToken and stale.details == {"current": 2} and stale.http_status == 409
    odd = error_from_http(418, {"error": {"code": "teapot", "message": "short and stout", "details": {}}})
    assert type(odd) is LedgerError and (odd.code, odd.http_status, odd.message) == ("teapot", 418, "short and stout")
    assert type(error_from_http(502, None)) is LedgerUnavailable


def test_an_unreachable_ledger_and_the_token_stays_out_of_sight():
    from servers import free_port

    client = HttpLedger(f"http://user:pw@127.0.0.1:{free_port()}", token=SECRET, timeout=2)
    with pytest.raises(LedgerUnavailable) as down:
        client.job(jid("down"), owner="w")
    assert SECRET not in repr(client) and "pw" not in repr(client) and "pw" not in str(down.value)
    assert SECRET not in str(down.value) and down.value.__cause__ is None


def test_the_local_path_imports_no_flask():
    # marshmallow it does import: the request bodies' one declaration (kernel/bodies.py) is what
    # LocalLedger checks a body against, as the routes do.
    code = ("import sys; import durable_ledger.client; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('flask', 'werkzeug', 'flask_wtf')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
