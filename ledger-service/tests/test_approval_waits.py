"""Executions waiting for an approval (approvals/waits.py), on both backends.

The resume URL is a real HTTP server on loopback that counts the calls it gets (and can be told
to be down, or to answer like n8n does while the execution is not parked yet): the counter is
the proof of exactly-once, not the ledger's own bookkeeping.
"""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import quote

import pytest

from conftest import auth
from durable_ledger.auth import Principal
from durable_ledger.approvals import waits as W
from durable_ledger.approvals.rules import grant
from durable_ledger.store.db import db
from durable_ledger.kernel.errors import StaleFencingToken, ValidationFailed
from durable_ledger.store.wait_models import ApprovalDelivery, ApprovalWait

BODY = {"post_id": 7, "title": "T"}
APPROVER = Principal("acme", "approver", "ann")
RUNNER = Principal("acme", "runner", "test")
FAST = {"max_attempts": 4, "backoff_s": 0.05, "backoff_max_s": 0.2, "timeout_s": 2.0}


class N8nStandIn:
    """Answers POST /webhook-waiting/<id>; ``answers`` is a list of statuses to give first (then 200),
    ``down`` refuses connections (the server socket is closed)."""

    def __init__(self, port=0):
        self.calls, self.answers, self.lock = [], [], threading.Lock()
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                with stand_in.lock:
                    status = stand_in.answers.pop(0) if stand_in.answers else 200
                    stand_in.calls.append({"path": self.path, "body": body, "status": status})
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(b'{"message": "Workflow was started"}' if status == 200 else
                                 b'{"code": 409, "message": "The execution \\"5\\" is running already."}')

            def log_message(self, *_a):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, execution_id="5"):
        return f"http://127.0.0.1:{self.port}/webhook-waiting/{execution_id}?signature=s3cr3t-{execution_id}"

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def n8n():
    s = N8nStandIn()
    yield s
    try:
        s.stop()
    except Exception:  # noqa: BLE001 - already stopped by the test
        pass


@pytest.fixture
def halted(client):
    """A job with a lease and a publish halted for approval; returns (operation key, token, digest)."""
    client.put("/v1/jobs/a1", json={"pipeline": "article"}, headers=auth())
    tok = client.post("/v1/jobs/a1/lease", json={"owner": "w1"}, headers=auth()).get_json()["fencing_token"]
    out = client.post("/v1/operations/begin", headers=auth(), json={
        "job_id": "a1", "action": "publish", "payload": BODY, "fencing_token": tok,
        "target": "wordpress:default"}).get_json()
    assert (out["decision"], out["reason"]) == ("halt", "approval_required")
    return out["operation"]["operation_key"], tok, out["operation"]["request_hash"]


def register(client, key, token, url, **headers):
    return client.post(f"/v1/operations/{quote(key, safe='')}/wait", headers={**auth(), **headers},
                       json={"fencing_token": token, "resume_url": url})


def approve(key, digest):
    """What the approvals console does: grant, then announce the decision."""
    with db.connection_context():
        grant(APPROVER, "a1", 1, "publish", digest, "wordpress:default", time.time() + 3600)
        return W.decision_made("acme", key, "approved", "looks good")


def deliver(n8n, **kw):
    with db.connection_context():
        return W.deliver_due(W.allowed_hosts(), **{**FAST, **kw})


def deliveries():
    with db.connection_context():
        return list(ApprovalDelivery.select().order_by(ApprovalDelivery.id))


def test_register_wait_is_fenced_and_only_for_an_operation_halted_for_approval(client, halted, n8n):
    key, tok, _ = halted
    r = register(client, key, tok + 1, n8n.url())
    assert r.status_code == 422  # a token never issued
    client.post("/v1/jobs/a1/lease", json={"owner": "w2", "takeover": True}, headers=auth())
    r = register(client, key, tok, n8n.url())
    assert (r.status_code, r.get_json()["error"]["code"]) == (409, "stale_fencing_token")
    new_tok = tok + 1
    r = register(client, key, new_tok, n8n.url(), **{"X-N8N-Execution-Id": "5", "X-N8N-Workflow-Id": "wfA"})
    assert r.status_code == 201, r.get_json()
    wait = r.get_json()["wait"]
    assert (wait["execution_id"], wait["workflow_id"], wait["open"]) == ("5", "wfA", True)
    assert "s3cr3t" not in json.dumps(r.get_json())  # the resume token is never echoed
    assert wait["resume_url"].endswith("/webhook-waiting/5?<redacted>")
    again = register(client, key, new_tok, n8n.url())
    assert again.status_code == 200 and again.get_json()["wait"]["id"] == wait["id"]  # idempotent

    # Not halted for approval: a draft that was dispatched, an unknown key.
    d = client.post("/v1/operations/begin", headers=auth(), json={
        "job_id": "a1", "action": "create_draft", "payload": BODY, "fencing_token": new_tok}).get_json()
    r = register(client, d["operation"]["operation_key"], new_tok, n8n.url())
    assert (r.status_code, r.get_json()["error"]["code"]) == (409, "invalid_transition")
    assert register(client, "acme:a1:v1:nope", new_tok, n8n.url()).status_code == 404
    other = client.post(f"/v1/operations/{quote(key, safe='')}/wait", headers=auth("other-token"),
                        json={"fencing_token": new_tok, "resume_url": n8n.url()})
    assert other.status_code == 404  # another tenant does not see the operation


@pytest.mark.parametrize("url", ["ftp://127.0.0.1/x", "http://169.254.169.254/latest/meta-data", "file:///etc/passwd",
                                 "http://user:pw@127.0.0.1:5678/webhook-waiting/1", "http://10.0.0.8:5678/w/1",
                                 "javascript:alert(1)", "http://[::1"])
def test_register_wait_refuses_resume_urls_off_the_allow_list(client, halted, url):
    key, tok, _ = halted
    r = register(client, key, tok, url)
    assert (r.status_code, r.get_json()["error"]["code"]) == (422, "validation_error"), r.get_json()


def test_allowed_hosts_default_loopback_plus_n8n_url_or_the_configured_list():
    assert W.allowed_hosts() == {"localhost", "127.0.0.1", "::1"}
    assert "n8n.internal" in W.allowed_hosts("https://n8n.internal:5678/")
    hosts = W.allowed_hosts("https://n8n.internal", "n8n-a:5678, n8n-b")
    assert hosts == {"n8n-a:5678", "n8n-b"}
    W.check_resume_url("http://n8n-a:5678/webhook-waiting/1", hosts)
    W.check_resume_url("https://n8n-b/webhook-waiting/1", hosts)
    with pytest.raises(ValidationFailed):
        W.check_resume_url("http://n8n-a:9999/webhook-waiting/1", hosts)
    with pytest.raises(ValidationFailed):
        W.check_resume_url("http://127.0.0.1:5678/webhook-waiting/1", hosts)


def test_decision_resumes_the_waiting_execution_once_with_the_decision(client, halted, n8n):
    key, tok, digest = halted
    assert register(client, key, tok, n8n.url()).status_code == 201
    assert deliver(n8n)["delivered"] == 0  # no decision yet: nothing is called
    assert approve(key, digest) == 1
    assert deliver(n8n)["delivered"] == 1
    body = n8n.calls[0]["body"]
    decided = body.pop("decided_by")
    assert [c["body"] for c in n8n.calls] == [{"decision": "approved", "reason": "looks good", "operation_key": key}]
    assert [(d["name"], d["decision"], d["door"]) for d in decided] == [("ann", "approved", "api")]
    assert n8n.calls[0]["path"] == "/webhook-waiting/5?signature=s3cr3t-5"
    for _ in range(3):
        assert deliver(n8n)["delivered"] == 0
    assert len(n8n.calls) == 1
    waits = client.get("/v1/jobs/a1/waits", headers=auth()).get_json()["waits"]
    assert waits[0]["delivery"]["state"] == "delivered" and waits[0]["open"] is False
    # The resumed execution's Begin Step is answered by the gate: dispatch, once.
    out = client.post("/v1/operations/begin", headers=auth(), json={
        "job_id": "a1", "action": "publish", "payload": BODY, "fencing_token": tok,
        "target": "wordpress:default"}).get_json()
    assert out["decision"] == "dispatch"
    report = client.get("/v1/jobs/a1/report", headers=auth()).get_json()
    assert "s3cr3t" not in json.dumps(report)


def test_double_decision_gives_one_delivery(client, halted, n8n):
    key, tok, digest = halted
    register(client, key, tok, n8n.url())
    assert approve(key, digest) == 1
    with db.connection_context():
        assert W.decision_made("acme", key, "approved") == 0  # double click
        assert W.decision_made("acme", key, "denied", "changed my mind") == 0  # before delivery: same wait
    deliver(n8n)
    deliver(n8n)
    assert len(n8n.calls) == 1 and len(deliveries()) == 1


def test_two_concurrent_deliverers_call_the_resume_url_once(client, halted, n8n):
    key, tok, digest = halted
    urls = [n8n.url(str(i)) for i in range(8)]  # eight waiting executions, one decision
    for u in urls:
        assert register(client, key, tok, u).status_code == 201
    assert approve(key, digest) == 8
    barrier, tallies = threading.Barrier(2), []

    def run():
        barrier.wait()
        tallies.append(deliver(n8n))

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(c["path"] for c in n8n.calls) == sorted(u.split(str(n8n.port), 1)[1] for u in urls)
    assert sum(t["delivered"] for t in tallies) == 8
    assert all(d.state == "delivered" and d.attempts == 1 for d in deliveries())


def test_resume_url_down_is_retried_with_backoff_then_delivered_once(client, halted, n8n):
    key, tok, digest = halted
    register(client, key, tok, n8n.url())
    port = n8n.port
    n8n.stop()  # n8n is down when the approver decides
    approve(key, digest)
    # Bounds from clocks read around each call, never a fixed margin: a loaded machine may take
    # any time between two lines, and the backoff (1 s, then 2 s) must still read as doubled.
    slow = {"backoff_s": 1.0, "backoff_max_s": 4.0}
    t0 = time.time()
    assert deliver(n8n, **slow)["retry"] == 1
    t1 = time.time()
    (d,) = deliveries()
    assert (d.state, d.attempts) == ("pending", 1) and t0 + 1.0 <= d.next_attempt_at <= t1 + 1.0
    assert d.last_error["error"] == "ConnectionError"
    if time.time() < d.next_attempt_at:
        assert deliver(n8n, **slow)["retry"] == 0  # not due yet: backoff
    time.sleep(max(0.0, d.next_attempt_at - time.time()) + 0.01)
    t2 = time.time()
    assert deliver(n8n, **slow)["retry"] == 1
    t3 = time.time()
    (d,) = deliveries()
    assert d.attempts == 2 and t2 + 2.0 <= d.next_attempt_at <= t3 + 2.0  # doubled

    back = _restart_on(port)  # n8n is back on the same address
    try:
        deadline = time.time() + 10
        while not back.calls and time.time() < deadline:
            deliver(back, **slow)
            time.sleep(0.05)
        for _ in range(3):
            deliver(back, **slow)
        assert len(back.calls) == 1
        (d,) = deliveries()
        assert (d.state, d.attempts) == ("delivered", 3)
    finally:
        back.stop()


def _restart_on(port):
    for _ in range(50):
        try:
            return N8nStandIn(port)
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"port {port} did not come free")


def test_attempts_are_bounded_then_failed_and_visible(client, halted, n8n):
    key, tok, digest = halted
    register(client, key, tok, n8n.url())
    n8n.answers = [500] * 10
    approve(key, digest)
    deadline = time.time() + 5
    while deliveries()[0].state == "pending" and time.time() < deadline:
        deliver(n8n)
        time.sleep(0.05)
    (d,) = deliveries()
    assert (d.state, d.attempts, d.last_status) == ("failed", FAST["max_attempts"], 500)
    assert len(n8n.calls) == FAST["max_attempts"]
    waits = client.get("/v1/jobs/a1/waits", headers=auth()).get_json()["waits"]
    assert waits[0]["delivery"]["state"] == "failed"
    with db.connection_context():
        from durable_ledger.store.models import AuditLog

        audit = AuditLog.get(AuditLog.action == "approval_resume_failed")
        assert audit.detail["attempts"] == FAST["max_attempts"] and "s3cr3t" not in json.dumps(audit.detail)
    metrics = client.get("/metrics").get_data(as_text=True)
    assert 'durable_approval_resumes{state="failed"} 1' in metrics


def test_not_parked_yet_409_is_retried_and_finished_execution_gives_up(client, halted, n8n):
    key, tok, digest = halted
    register(client, key, tok, n8n.url("5"))
    register(client, key, tok, n8n.url("6"))
    n8n.answers = [409]  # the first call: "running already" (the Wait node has not parked it yet)
    approve(key, digest)
    deliver(n8n)
    time.sleep(0.06)
    deliver(n8n)
    states = sorted(d.state for d in deliveries())
    assert states == ["delivered", "delivered"] and len(n8n.calls) == 3


def test_wait_registered_after_the_decision_is_answered_at_once(client, halted, n8n):
    key, tok, digest = halted
    approve(key, digest)  # the approver was faster than the workflow: nobody was waiting
    r = register(client, key, tok, n8n.url())
    assert r.status_code == 201 and r.get_json()["decision"] == "approved"
    deliver(n8n)
    assert [c["body"]["decision"] for c in n8n.calls] == ["approved"]
    # The same execution coming back to wait again (the gate still said approval_required) is
    # not answered with the same decision again: no resume loop.
    r = register(client, key, tok, n8n.url())
    assert r.status_code == 201 and r.get_json()["decision"] is None
    deliver(n8n)
    assert len(n8n.calls) == 1


def test_approval_through_the_old_api_is_adopted_by_the_deliverer(client, halted, n8n):
    key, tok, digest = halted
    register(client, key, tok, n8n.url())
    with db.connection_context():
        grant(APPROVER, "a1", 1, "publish", digest, "wordpress:default", time.time() + 3600)  # no decision_made
    assert deliver(n8n)["adopted"] == 1
    deliver(n8n)
    assert len(n8n.calls) == 1 and deliver(n8n)["adopted"] == 0


def test_denial_resumes_with_the_reason_and_the_gate_halts(client, halted, n8n):
    from durable_ledger.approvals import decisions as approval_decisions

    key, tok, digest = halted
    register(client, key, tok, n8n.url())
    with db.connection_context():
        approval_decisions.deny(APPROVER, key, digest, "wrong headline")
    deliver(n8n)
    decided = n8n.calls[0]["body"].pop("decided_by")
    assert [c["body"] for c in n8n.calls] == [{"decision": "denied", "reason": "wrong headline", "operation_key": key}]
    assert [(d["name"], d["decision"], d["door"]) for d in decided] == [("ann", "denied", "api")]
    out = client.post("/v1/operations/begin", headers=auth(), json={
        "job_id": "a1", "action": "publish", "payload": BODY, "fencing_token": tok,
        "target": "wordpress:default"}).get_json()
    assert (out["decision"], out["reason"]) == ("halt", "approval_denied")


def test_core_register_wait_errors(conn, halted, n8n):
    key, tok, _ = halted
    with pytest.raises(StaleFencingToken):
        W.register_wait(RUNNER, key, n8n.url(), tok - 1 if tok > 1 else -1)
    with pytest.raises(ValidationFailed):
        W.register_wait(RUNNER, key, "http://example.com/w/1", tok)
    ans, created = W.register_wait(RUNNER, key, n8n.url(), tok, execution_id="9")
    assert created and ans["wait"]["execution_id"] == "9"
    with pytest.raises(ValueError):
        W.decision_made("acme", key, "maybe")
    assert ApprovalWait.select().count() == 1


def test_n8n_headers_are_stamped_on_operation_events(client, n8n):
    client.put("/v1/jobs/n1", json={}, headers=auth())
    tok = client.post("/v1/jobs/n1/lease", json={"owner": "w"}, headers=auth()).get_json()["fencing_token"]
    h = {**auth(), "X-N8N-Execution-Id": "42", "X-N8N-Workflow-Id": "wfArticle"}
    out = client.post("/v1/operations/begin", headers=h, json={
        "job_id": "n1", "action": "create_draft", "payload": BODY, "fencing_token": tok}).get_json()
    key = out["operation"]["operation_key"]
    client.post(f"/v1/operations/{quote(key, safe='')}/confirm", headers=h,
                json={"fencing_token": tok, "remote_id": "17"})
    # Without headers (another client), no n8n provenance: nothing left over from the last request.
    out2 = client.post("/v1/operations/begin", headers=auth(), json={
        "job_id": "n1", "action": "set_seo", "payload": BODY, "fencing_token": tok}).get_json()
    events = client.get(f"/v1/operations/{quote(key, safe='')}", headers=auth()).get_json()["events"]
    assert [e["detail"]["n8n"] for e in events] == [{"execution_id": "42", "workflow_id": "wfArticle"}] * 2
    events2 = client.get(f"/v1/operations/{quote(out2['operation']['operation_key'], safe='')}",
                         headers=auth()).get_json()["events"]
    assert "n8n" not in (events2[0]["detail"] or {})
    bad = {**auth(), "X-N8N-Execution-Id": "x" * 200}
    r = client.post("/v1/operations/begin", headers=bad, json={
        "job_id": "n1", "action": "add_pack", "payload": BODY, "fencing_token": tok})
    assert r.status_code == 200  # provenance never fails a call; an unusable id is dropped


def test_init_db_adds_the_wait_tables_to_an_existing_database(database):
    from durable_ledger.store.migrations import create_schema

    with db.connection_context():
        db.drop_tables([ApprovalDelivery, ApprovalWait])
        assert not db.table_exists("approval_wait")
    create_schema()  # what `durable-ledger init-db` runs on an existing database
    with db.connection_context():
        assert db.table_exists("approval_wait") and db.table_exists("approval_delivery")
