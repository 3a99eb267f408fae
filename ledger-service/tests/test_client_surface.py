"""The client's calls beyond the step cycle, on both transports and both databases.

Same layout as test_client.py: `ledger` is a LocalLedger or an HttpLedger on one database,
`other` the other transport on the same database, so each call is also shown crossing over
(begun through one, settled or read through the other). Every call has at least one refusal,
and the refusal is the same class (and code) on both transports. The server and this process
share the Agents API stand-in (session binding and sync) and the artifact directory.
"""

import hashlib
import uuid
from types import SimpleNamespace

import pytest
from agents_standin import WEBHOOK_SECRET, StandIn, message_item
from conftest import TOKENS

from durable_ledger.client import Halted, HttpLedger, LedgerError, LocalLedger, StaleFencingToken, StepUsageError
from durable_ledger.client.calls import Batch
from durable_ledger.client.ledger import GateAnswer
from durable_ledger.kernel.errors import (ArtifactNotFound, ContentChanged, DigestMismatch, Forbidden, JobNotFound,
                                          NotFound, SecretInCheckpoint, SessionNotBound, SessionNotFound,
                                          ValidationFailed)
from durable_ledger.store.db import db
from durable_ledger.store.models import AuditLog, Job, Operation
from servers import LedgerServer

SECRET = "sk-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4"
TOKEN_OF = {"runner": "runner-token", "approver": "approver-token"}


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def stack(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("surface")
    url = f"sqlite:///{tmp / 'ledger.db'}" if request.param == "sqlite" else request.getfixturevalue("pg_url")
    standin = StandIn().start()
    standin.default_tenant = "acme"  # sessions are bound only for the tenant in their metadata
    with pytest.MonkeyPatch.context() as mp:  # the server copies this environment when it starts
        for name, value in {"OPENAI_API_KEY": "test", "OPENAI_BASE_URL": standin.base_url,
                            "OPENAI_WEBHOOK_SECRET": WEBHOOK_SECRET, "DURABLE_OPENAI_MAX_RETRIES": "0",
                            "DURABLE_ARTIFACT_DIR": str(tmp / "artifacts")}.items():
            mp.setenv(name, value)
        LocalLedger(url, tenant="acme", actor="probe").close()  # binds and migrates, as the server will
        with LedgerServer(url, TOKENS, workers=2, threads=4, log_path=tmp / "ledger.log") as server:
            yield SimpleNamespace(url=url, server=server.url, standin=standin)
    standin.stop()


def make(stack, transport, actor="test", role="runner", tenant="acme"):
    if transport == "local":
        return LocalLedger(stack.url, tenant=tenant, actor=actor, role=role, migrate=False)
    token = "other-token" if tenant == "other" else TOKEN_OF[role]
    return HttpLedger(stack.server, token=token)


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


@pytest.fixture
def approver(stack, transport):
    """An approver on the same transport as ``ledger``."""
    client = make(stack, transport, actor="boss", role="approver")
    yield client
    client.close()


@pytest.fixture
def stranger(stack, transport):
    """A runner of another tenant, on the same transport as ``ledger``."""
    client = make(stack, transport, actor="stranger", tenant="other")
    yield client
    client.close()


def jid(name):
    return f"{name}-{uuid.uuid4().hex[:8]}"


def rows(job_id):
    with db.connection_context():
        q = (Operation.select(Operation.action, Operation.state, Operation.remote_id)
             .join(Job).where(Job.tenant == "acme", Job.job_id == job_id).order_by(Operation.id))
        return [(o.action, o.state, o.remote_id) for o in q]


def audited(job_id, action):
    with db.connection_context():
        return (AuditLog.select().join(Job, on=(AuditLog.job == Job.id))
                .where(Job.job_id == job_id, AuditLog.action == action).count())


def refusals(code):
    with db.connection_context():
        return AuditLog.select().where(AuditLog.action == f"refused:{code}").count()


def refused(cls, call, *args, **kwargs):
    """The refusal ``call`` raises: exactly ``cls``, with its own code."""
    with pytest.raises(LedgerError) as info:
        call(*args, **kwargs)
    assert type(info.value) is cls, (type(info.value), info.value)
    assert info.value.code == cls.code
    return info.value


def dispatched(job, action, payload=None, **kw):
    """A step entered and left dispatched (its outcome to be reported by the test)."""
    step = job.step(action, payload if payload is not None else {"n": 1}, **kw)
    step.__enter__()
    assert step.decision == "dispatch"
    return step


def test_surface_new_version_and_get_job(ledger, other):
    job_id = jid("version")
    job = ledger.job(job_id, owner="worker-a")
    with job.step("draft", {"t": 1}) as step:
        step.confirm("1")
    info = job.new_version()
    assert info["task_version"] == 2 and job.info["task_version"] == 2
    assert other.get_job(job_id)["task_version"] == 2
    with job.step("draft", {"t": 1}) as step:  # v2's key: the step runs again
        assert step.operation_key.endswith(":v2:draft") and not step.done
        step.confirm("2")
    assert job.new_version(2)["task_version"] == 2  # the current version again: a no-op
    e1 = refused(ValidationFailed, job.new_version, 0)
    assert "task_version" in e1.details["fields"]
    later = other.job(job_id, owner="worker-b", takeover=True)
    e2 = refused(StaleFencingToken, job.new_version)
    assert e2.details["current"] == later.fencing_token
    refused(JobNotFound, other.get_job, jid("missing"))


def test_surface_outcome_is_classified_by_the_ledger(ledger, other):
    job_id = jid("outcome")
    job = ledger.job(job_id, owner="worker-a")
    created = dispatched(job, "create")
    answer = created.outcome(http_status=201, remote_id=77, receipt={"link": "/p/77"})
    assert answer["classification"] == "confirm" and answer["operation"]["state"] == "CONFIRMED"
    with pytest.raises(StepUsageError):  # the step has its outcome
        created.confirm("78")
    timeout = dispatched(job, "notify")
    assert timeout.outcome(error_kind="timeout")["classification"] == "unknown"
    # Begun through one transport, its outcome reported through the other (same owner: same token).
    same = other.job(job_id, owner="worker-a")
    assert same.fencing_token == job.fencing_token
    busy = dispatched(job, "upload")
    assert same.outcome(busy.operation_key, http_status=422)["classification"] == "fail"
    gone = dispatched(job, "revoke")
    assert same.outcome(gone.operation_key, http_status=401)["classification"] == "fail_halt"
    assert rows(job_id) == [("create", "CONFIRMED", "77"), ("notify", "UNKNOWN", None), ("upload", "FAILED", None),
                            ("revoke", "FAILED", None)]
    refused(ValidationFailed, job.outcome, busy.operation_key, http_status=99)
    refused(ValidationFailed, job.outcome, busy.operation_key, error_kind="eaten_by_a_grue")
    other.job(job_id, owner="worker-b", takeover=True)
    refused(StaleFencingToken, job.outcome, timeout.operation_key, http_status=422)  # a stale failure: refused
    # The attempt's own answer after the takeover settles it (reconciliation/attempts.py settle_own).
    assert job.outcome(timeout.operation_key, http_status=200, remote_id="5")["operation"]["state"] == "CONFIRMED"


def test_surface_lookup_result_settles_then_gates_again(ledger, other):
    job_id = jid("lookup")
    job = ledger.job(job_id, owner="worker-a")
    with pytest.raises(TimeoutError):
        with job.step("create", {"t": 1}):
            raise TimeoutError("the answer was lost")
    key = f"acme:{job_id}:v1:create"
    refused(ValidationFailed, job.lookup_result, key, 1, "maybe")
    refused(ValidationFailed, job.lookup_result, key, 0, "found", remote_id="9")
    # Looked up by a run on the other transport: found, so the gate now reuses its receipt.
    rerun = other.job(job_id, owner="worker-b", takeover=True)
    answer = rerun.lookup_result(key, 1, "found", remote_id="9", receipt={"link": "/p/9"})
    assert isinstance(answer, GateAnswer) and answer.decision == "reuse_receipt"
    assert answer.details["lookup"] == {"outcome": "applied", "verdict": "found", "attempt": 1}
    assert answer.receipt["link"] == "/p/9" and rows(job_id) == [("create", "CONFIRMED", "9")]
    again = job.ledger.job(job_id, owner="worker-b")  # the first transport reads the settled step
    assert again.lookup_result(key, 1, "absent").details["lookup"]["outcome"] == "not_in_flight"
    refused(StaleFencingToken, job.lookup_result, key, 1, "absent")


def test_surface_batch_confirms_and_begins_each_item_on_its_own(ledger, other):
    job_id = jid("batch")
    job = ledger.job(job_id, owner="worker-a")
    first = job.batch(begin=[{"action": "a", "payload": {"i": 1}}, {"action": "b", "payload": {"i": 2}}])
    assert isinstance(first, Batch) and [s.decision for s in first.begin] == ["dispatch", "dispatch"]
    keys = [s.operation_key for s in first.begin]
    # Confirmed and gated again through the other transport in one call: a's receipt is reused,
    # b's begin with another payload is refused in its own slot and changes nothing else.
    same = other.job(job_id, owner="worker-a")
    second = same.batch(confirm=[{"operation_key": keys[0], "remote_id": "A"},
                                 {"operation_key": keys[1], "remote_id": "B", "receipt": {"x": 1}, "cost": 0.5}],
                        begin=[{"action": "a", "payload": {"i": 1}}, {"action": "b", "payload": {"i": 3}},
                               {"action": "c", "requires_approval": True, "target": "wordpress:test"}])
    assert [s["operation"]["state"] for s in second.confirm] == ["CONFIRMED", "CONFIRMED"]
    assert second.begin[0].decision == "reuse_receipt" and second.begin[0].receipt is not None
    assert type(second.begin[1]) is DigestMismatch and second.begin[1].code == "digest_mismatch"
    assert (second.begin[2].decision, second.begin[2].reason) == ("halt", "approval_required")
    assert rows(job_id) == [("a", "CONFIRMED", "A"), ("b", "CONFIRMED", "B"), ("c", "PREPARED", None)]
    e = refused(ValidationFailed, job.batch, begin=[{"action": f"x{i}"} for i in range(101)])
    assert "begin" in e.details["fields"]
    refused(ValidationFailed, job.batch, confirm=[{"operation_key": keys[0]}])  # no remote_id
    other.job(job_id, owner="worker-b", takeover=True)
    stale = job.batch(confirm=[{"operation_key": keys[0], "remote_id": "A"}], begin=[{"action": "d"}])
    assert type(stale.begin[0]) is StaleFencingToken and stale.begin[0].details["current"] == 2
    assert isinstance(stale.confirm[0], (dict, StaleFencingToken))  # CONFIRMED already: answered as it stands


def test_surface_checkpoints_write_and_read_across_transports(ledger, other, stranger):
    job_id = jid("checkpoint")
    job = ledger.job(job_id, owner="worker-a", phases=["research", "draft", "publish"])
    assert job.latest_checkpoint() is None
    sha = hashlib.sha256(b"notes").hexdigest()
    out = job.checkpoint("research", artifacts=[{"role": "notes", "uri": "file:///notes.md", "sha256": sha}],
                         remote={"doc": "d-1"}, next_allowed_actions=["draft"])
    assert out["checkpoint"]["phase"] == "research" and out["job"]["phase"] == "research"
    same = other.job(job_id, owner="worker-a")
    same.checkpoint("draft", remote={"post": 12})
    cps = ledger.checkpoints(job_id)
    assert [c["phase"] for c in cps] == ["research", "draft"] and other.checkpoints(job_id) == cps
    assert job.latest_checkpoint()["phase"] == "draft" and audited(job_id, "checkpoint") == 2
    before = refusals("secret_in_checkpoint")
    e = refused(SecretInCheckpoint, job.checkpoint, "publish", remote={"api_key": SECRET})
    assert SECRET not in str(e.details) and refusals("secret_in_checkpoint") - before == 1
    refused(ValidationFailed, job.checkpoint, "", remote={})
    refused(ValidationFailed, job.checkpoint, "publish", artifacts=[{"role": "x", "uri": "u", "sha256": "nope"}])
    refused(JobNotFound, stranger.checkpoints, job_id)
    other.job(job_id, owner="worker-b", takeover=True)
    refused(StaleFencingToken, job.checkpoint, "publish")
    assert len(ledger.checkpoints(job_id)) == 2


def test_surface_artifacts_are_shared_by_content(ledger, other, stranger):
    data = f"artifact {uuid.uuid4()}".encode()
    sha = hashlib.sha256(data).hexdigest()
    put = ledger.put_artifact(data, sha256=sha)
    assert put == {"sha256": sha, "size": len(data), "created": True}
    assert other.put_artifact(data) == {"sha256": sha, "size": len(data), "created": False}
    assert other.artifact(sha) == data and ledger.artifact(sha) == data
    refused(DigestMismatch, ledger.put_artifact, b"something else", sha256=sha)
    refused(ValidationFailed, ledger.put_artifact, data, sha256="ABC")
    refused(ArtifactNotFound, ledger.artifact, hashlib.sha256(b"never stored").hexdigest())
    refused(ArtifactNotFound, stranger.artifact, sha)


def test_surface_approvals_and_waits(ledger, other, approver, stack, transport):
    job_id = jid("approve")
    job = ledger.job(job_id, owner="worker-a")
    with pytest.raises(Halted) as blocked:
        with job.step("publish", {"post": 1}, target="wordpress:test", requires_approval=True):
            pass
    key = blocked.value.operation_key
    assert blocked.value.reason == "approval_required"
    refused(Forbidden, ledger.pending_approvals)
    pending = {p["operation"]["operation_key"]: p for p in approver.pending_approvals()}
    assert pending[key]["status"] == "waiting"
    digest = pending[key]["operation"]["request_hash"]
    # The workflow parks itself: the wait is registered through one transport, read through the other.
    wait = job.wait_for_approval(key, "http://127.0.0.1:9/webhook-waiting/1?signature=s3cret", execution_id="41")
    assert wait["wait"]["operation_key"] == key and wait["decision"] is None
    waits = other.waits(job_id)
    assert len(waits) == 1 and "s3cret" not in str(waits) and waits[0]["execution_id"] == "41"
    refused(ValidationFailed, job.wait_for_approval, key, "http://203.0.113.9/resume")
    refused(ValidationFailed, job.wait_for_approval, key, "http://127.0.0.1:9/r", execution_id="bad id!")
    refused(Forbidden, ledger.approve, key, digest)
    refused(ContentChanged, approver.deny, key, "0" * 64, "no")
    refused(ValidationFailed, approver.approve, key, digest, expires_in_s=5)
    # Denied on one transport, approved by an approver on the other: the step then dispatches.
    denial, created = approver.deny(key, digest, "not yet")
    assert created and denial["reason"] == "not yet"
    with pytest.raises(Halted) as denied:
        with job.step("publish", {"post": 1}, target="wordpress:test", requires_approval=True):
            pass
    assert denied.value.reason == "approval_denied"
    boss = make(stack, "http" if transport == "local" else "local", actor="boss-2", role="approver")
    approval, created = boss.approve(key, digest, note="ok")
    assert created and approval["note"] == "ok"
    assert boss.approve(key, digest)[1] is False  # the same approval already stands
    boss.close()
    with job.step("publish", {"post": 1}, target="wordpress:test", requires_approval=True) as step:
        assert step.decision == "dispatch"
        step.confirm("p-1")
    assert audited(job_id, "approval_granted") == 1 and len(job.waits()) == 1


def test_surface_grant_and_revoke_an_approval_by_digest(ledger, other, approver, stack, transport):
    from datetime import datetime, timedelta, timezone

    job_id = jid("grant")
    job = ledger.job(job_id, owner="worker-a")
    with pytest.raises(Halted) as blocked:
        with job.step("publish", {"post": 2}, target="wordpress:test", requires_approval=True):
            pass
    digest = other.operation(blocked.value.operation_key)["request_hash"]
    until = datetime.now(timezone.utc) + timedelta(hours=1)
    refused(Forbidden, ledger.grant_approval, job_id, 1, "publish", digest, "wordpress:test", until)
    refused(ValidationFailed, approver.grant_approval, job_id, 1, "publish", digest, "wordpress:test", "tomorrow")
    refused(ValidationFailed, approver.grant_approval, job_id, 1, "publish", "beef", "wordpress:test", until)
    refused(ValidationFailed, approver.grant_approval, job_id, 1, "publish", digest, "wordpress:test",
            "9999-12-31T23:59:59-12:00")
    refused(JobNotFound, approver.grant_approval, jid("nojob"), 1, "publish", digest, "wordpress:test", until)
    # Granted through one transport, revoked through the other, read back by the gate.
    granted = approver.grant_approval(job_id, 1, "publish", digest, "wordpress:test", until, note="pre-approved")
    assert granted["content_digest"] == digest and granted["note"] == "pre-approved"
    boss = make(stack, "http" if transport == "local" else "local", actor="boss-2", role="approver")
    revoked = boss.revoke_approval(granted["id"])
    assert revoked["id"] == granted["id"] and revoked["revoked_at"] is not None
    with pytest.raises(Halted):
        with job.step("publish", {"post": 2}, target="wordpress:test", requires_approval=True):
            pass
    again = boss.grant_approval(job_id, 1, "publish", digest, "wordpress:test", until.isoformat())
    with job.step("publish", {"post": 2}, target="wordpress:test", requires_approval=True) as step:
        assert step.decision == "dispatch"
        step.confirm("p-2")
    refused(NotFound, approver.revoke_approval, 2**31 - 1)
    refused(ValidationFailed, approver.revoke_approval, "1")
    refused(Forbidden, ledger.revoke_approval, again["id"])
    boss.close()
    assert audited(job_id, "approval_granted") == 2 and audited(job_id, "approval_revoked") == 1


def test_surface_session_binding_and_sync(stack, ledger, other, stranger):
    session_id, job_id = f"sess_{uuid.uuid4().hex[:8]}", jid("session")
    stack.standin.add_session(session_id, items=[message_item(i) for i in range(3)])
    job = ledger.job(job_id, owner="worker-a", session_id=session_id)  # PUT /v1/jobs/{id} with a session
    shown = other.session(job_id)
    assert shown["session_id"] == session_id
    synced = job.sync_session()
    assert synced["session_id"] == session_id and synced["item_count"] == 3
    assert other.job(job_id, owner="worker-a").sync_session()["item_count"] == 3
    stored = ledger.put_artifact(f"report {job_id}".encode())
    missing = hashlib.sha256(b"not there").hexdigest()
    evidence = job.sync_session(expected_artifacts=[{"role": "report", "sha256": stored["sha256"]},
                                                    {"role": "chart", "sha256": missing}])["artifacts"]
    assert evidence["verified"] is False and evidence["may_advance"] is False
    assert evidence["problems"] == [{"role": "chart", "sha256": missing, "problem": "missing"}]
    refused(ValidationFailed, job.sync_session, expected_artifacts=[{"role": "chart", "sha256": "x"}])
    # A second job bound after it was created (PUT /v1/jobs/{id}/session).
    second_session, second = f"sess_{uuid.uuid4().hex[:8]}", jid("session")
    stack.standin.add_session(second_session)
    later = other.job(second, owner="worker-a")
    assert later.bind_session(second_session)["session_id"] == second_session
    assert ledger.session(second)["session_id"] == second_session
    fresh = ledger.job(jid("fresh"), owner="w")
    refused(SessionNotFound, fresh.bind_session, "sess_missing")
    refused(JobNotFound, ledger.bind_session, jid("nobody"), second_session)
    refused(SessionNotBound, ledger.job(jid("unbound"), owner="w").sync_session)
    refused(ValidationFailed, ledger.bind_session, second, "")
    refused(JobNotFound, stranger.session, job_id)


def test_surface_refusals_are_the_same_in_detail(stack):
    """The same bad call through each transport: the same class, code and details (as JSON)."""
    import json

    LocalLedger(stack.url, tenant="acme", migrate=False)
    local, http = make(stack, "local"), make(stack, "http")
    boss_local, boss_http = make(stack, "local", role="approver"), make(stack, "http", role="approver")
    job_id = jid("details")
    job_l = local.job(job_id, owner="w")
    job_h = http.job(job_id, owner="w")
    assert job_l.fencing_token == job_h.fencing_token
    key = f"acme:{job_id}:v1:publish"
    with pytest.raises(Halted):
        with job_l.step("publish", {"p": 1}, target="wordpress:test", requires_approval=True):
            pass
    sha = hashlib.sha256(b"x").hexdigest()
    calls = [
        (lambda j, b: j.new_version(0)),
        (lambda j, b: j.outcome(key, http_status=99)),
        (lambda j, b: j.outcome(key, error_kind="grue")),
        (lambda j, b: j.lookup_result(key, 0, "maybe")),
        (lambda j, b: j.batch(begin=[{"action": f"x{i}"} for i in range(101)])),
        (lambda j, b: j.batch(confirm=[{"operation_key": key}])),
        (lambda j, b: j.checkpoint("")),
        (lambda j, b: j.checkpoint("p", artifacts=[{"role": "r", "uri": "u", "sha256": "no"}])),
        (lambda j, b: j.checkpoint("p", remote={"token": SECRET})),
        (lambda j, b: j.wait_for_approval(key, "http://127.0.0.1:9/r", execution_id="bad id!")),
        (lambda j, b: j.wait_for_approval(key, "http://203.0.113.9/resume")),
        (lambda j, b: j.ledger.approve(key, sha)),
        (lambda j, b: b.approve(key, sha, expires_in_s=5)),
        (lambda j, b: b.approve(key, sha)),
        (lambda j, b: b.deny(key, sha, "")),
        (lambda j, b: b.grant_approval(j.job_id, 1, "publish", sha, "wordpress:test", "not a date")),
        (lambda j, b: b.grant_approval(j.job_id, 0, "publish", sha, None, "2030-01-01T00:00:00Z")),
        (lambda j, b: j.ledger.grant_approval(j.job_id, 1, "publish", sha, "wordpress:test", "2030-01-01")),
        (lambda j, b: b.revoke_approval(2**31 - 1)),
        (lambda j, b: j.ledger.pending_approvals()),
        (lambda j, b: j.ledger.put_artifact(b"x", sha256="ABC")),
        (lambda j, b: j.ledger.put_artifact(b"y", sha256=sha)),
        (lambda j, b: j.ledger.artifact(hashlib.sha256(b"never").hexdigest())),
        (lambda j, b: j.outcome("bad\x00key", http_status=200)),
        (lambda j, b: j.ledger.artifact("../etc")),
        (lambda j, b: j.bind_session("")),
        (lambda j, b: j.sync_session()),
    ]
    for i, call in enumerate(calls):
        seen = []
        for job, boss in ((job_l, boss_local), (job_h, boss_http)):
            with pytest.raises(LedgerError) as info:
                call(job, boss)
            exc = info.value
            seen.append((type(exc), exc.code, exc.http_status, json.loads(json.dumps(exc.details))))
        assert seen[0] == seen[1], (i, seen)
    for client in (local, http, boss_local, boss_http):
        client.close()


def test_surface_a_step_with_an_approval_policy_needs_two_approvers(ledger, approver, stack, transport):
    """job.step(..., approval_policy=...) on both transports: one approval is 1 of 2, a second
    approver's makes the step dispatch; another policy on the same step is refused (409)."""
    job_id = jid("policy")
    job = ledger.job(job_id, owner="worker-a")
    policy = {"approvals_needed": 2}
    with pytest.raises(Halted) as blocked:
        with job.step("send", {"n": 1}, target="mail:list", approval_policy=policy):
            pass
    key = blocked.value.operation_key
    digest = {p["operation"]["operation_key"]: p for p in approver.pending_approvals()}[key]["operation"]["request_hash"]
    assert approver.approve(key, digest)[1] is True
    with pytest.raises(Halted) as still:
        with job.step("send", {"n": 1}, target="mail:list", approval_policy=policy):
            pass
    assert still.value.reason == "approval_required"
    with pytest.raises(LedgerError) as changed:
        with job.step("send", {"n": 1}, target="mail:list", approval_policy={"approvals_needed": 1}):
            pass
    assert changed.value.code == "approval_policy_changed"
    second = make(stack, "http" if transport == "local" else "local", actor="second-approver", role="approver")
    assert second.approve(key, digest)[1] is True
    second.close()
    with job.step("send", {"n": 1}, target="mail:list", approval_policy=policy) as step:
        assert step.decision == "dispatch"
        step.confirm("m-1")
