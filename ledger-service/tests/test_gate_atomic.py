"""The gate's stop conditions hold under concurrency: budgets and cancel are checked inside the claim.

Two real service processes (`serve`, 2 processes x 8 threads each) share one database, as in
test_concurrency.py. Each storm is repeated for many rounds, because one lucky interleaving
proves nothing; the counts come from the ledger's own rows, not from the answers alone.
"""

import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import requests

from test_concurrency import H, two_servers  # noqa: F401 - fixture

ROUNDS = 20
PER_WORKER = 200  # begins a worker of the cancel race may send at most


def _job(session, url, job, budgets=None):
    session.put(f"{url}/v1/jobs/{job}", headers=H, json={"budgets": budgets or {}}).raise_for_status()
    return session.post(f"{url}/v1/jobs/{job}/lease", headers=H, json={"owner": "w"}).json()["fencing_token"]


def _begin(session, url, job, action, token):
    r = session.post(url + "/v1/operations/begin", headers=H, timeout=30, json={
        "job_id": job, "action": action, "payload": {"a": action}, "fencing_token": token})
    body = r.json()
    return body["decision"] if r.status_code == 200 else body["error"]["code"], body


def test_gate_tool_call_budget_never_exceeded_by_concurrent_begins(two_servers):  # noqa: F811
    s0, url0 = requests.Session(), two_servers[0].url
    sessions = [requests.Session() for _ in range(20)]
    for rnd in range(ROUNDS):
        job = f"budget-{rnd}"
        token = _job(s0, url0, job, {"max_tool_calls": 3})
        barrier = threading.Barrier(20)

        def worker(i):
            barrier.wait()
            return [_begin(sessions[i], two_servers[i % 2].url, job, f"act-{i}-{k}", token)[0] for k in range(2)]

        with ThreadPoolExecutor(20) as pool:
            decisions = Counter(d for ds in pool.map(worker, range(20)) for d in ds)
        ops = s0.get(f"{url0}/v1/jobs/{job}/operations", headers=H).json()["operations"]
        assert decisions["dispatch"] == 3 and decisions["halt"] == 37, (rnd, decisions)
        assert len([o for o in ops if o["state"] == "SENT"]) == 3, (rnd, ops)
        assert s0.get(f"{url0}/v1/jobs/{job}", headers=H).json()["counters"]["tool_calls"] == 3


def test_gate_no_dispatch_after_a_committed_cancel(two_servers):  # noqa: F811
    s0, url0 = requests.Session(), two_servers[0].url
    sessions = [requests.Session() for _ in range(12)]
    late, cancel_s = Counter(), []
    for rnd in range(ROUNDS):
        job = f"cancel-{rnd}"
        token = _job(s0, url0, job)
        cancelled = threading.Event()
        barrier = threading.Barrier(13)
        answered_after = []

        def worker(i):
            barrier.wait()
            # Begins until two were sent after the cancel had answered (or PER_WORKER): each
            # round then has begins before, during and after the cancel, however fast they are.
            after = 0
            for k in range(PER_WORKER):
                started_after_cancel = cancelled.is_set()
                d, _ = _begin(sessions[i], two_servers[i % 2].url, job, f"act-{i}-{k}", token)
                if started_after_cancel:
                    answered_after.append(d)
                    after += 1
                    if after == 2:
                        break

        def canceller():
            barrier.wait()
            t0 = time.monotonic()
            r = requests.post(f"{two_servers[1].url}/v1/jobs/{job}/cancel", headers=H, json={"reason": "stop"})
            cancel_s.append(time.monotonic() - t0)
            cancelled.set()
            assert r.status_code == 200, r.text
            return r.json()

        with ThreadPoolExecutor(13) as pool:
            futures = [pool.submit(worker, i) for i in range(12)]
            report = pool.submit(canceller).result()
            for f in futures:
                f.result()
        # The cancel's report is read after its commit: every dispatched row must already be in it.
        # A SENT row missing from it was written after the cancel had committed.
        listed = {o["operation_key"] for o in report["in_flight_left_to_reconcile"]}
        ops = s0.get(f"{url0}/v1/jobs/{job}/operations", headers=H).json()["operations"]
        sent = {o["operation_key"] for o in ops if o["state"] == "SENT"}
        late[rnd] = len(sent - listed)
        assert not (sent - listed), (rnd, sorted(sent - listed))
        # A begin sent after the cancel had answered may only be refused.
        assert set(answered_after) <= {"halt"}, (rnd, Counter(answered_after))
        assert len(answered_after) == 12 * 2, (rnd, len(answered_after), cancel_s[-1])  # the race was run
    assert sum(late.values()) == 0, late


def test_gate_payload_and_hash_that_disagree_are_refused(client):
    from conftest import auth
    from durable_ledger.kernel.digest import request_digest

    client.put("/v1/jobs/dig", headers=auth(), json={})
    token = client.post("/v1/jobs/dig/lease", headers=auth(), json={"owner": "w"}).json["fencing_token"]
    approved = {"title": "A"}
    r = client.post("/v1/operations/begin", headers=auth(), json={
        "job_id": "dig", "action": "send", "payload": {"title": "B"}, "request_hash": request_digest(approved),
        "fencing_token": token})
    assert r.status_code == 422 and r.json["error"]["code"] == "digest_mismatch"
    assert client.get("/v1/jobs/dig/operations", headers=auth()).json["operations"] == []
    # Both, agreeing: accepted, and the stored digest is the payload's.
    r = client.post("/v1/operations/begin", headers=auth(), json={
        "job_id": "dig", "action": "send", "payload": approved, "request_hash": request_digest(approved),
        "fencing_token": token})
    assert r.json["decision"] == "dispatch" and r.json["operation"]["request_hash"] == request_digest(approved)


def test_gate_begins_resumes_and_cancels_together_never_deadlock(two_servers):  # noqa: F811
    """Claims hold the job and lease rows FOR SHARE; resumes (takeovers) and cancels write them.
    Any writer holding one row exclusively while waiting for the other would deadlock with a
    claim: PostgreSQL would abort one side and the caller would see a 500."""
    s0, url0 = requests.Session(), two_servers[0].url
    statuses = Counter()
    lock = threading.Lock()
    for rnd in range(5):
        job = f"mix-{rnd}"
        _job(s0, url0, job, {"max_tool_calls": 500})
        barrier = threading.Barrier(10)

        def beginner(i):
            session, url = requests.Session(), two_servers[i % 2].url
            barrier.wait()
            for k in range(15):
                token = session.get(f"{url}/v1/jobs/{job}", headers=H).json()["lease"]["fencing_token"]
                r = session.post(url + "/v1/operations/begin", headers=H, timeout=30, json={
                    "job_id": job, "action": f"a-{i}-{k}", "payload": {}, "fencing_token": token})
                with lock:
                    statuses[r.status_code] += 1

        def resumer(i):
            session, url = requests.Session(), two_servers[i % 2].url
            barrier.wait()
            for k in range(10):
                r = session.post(f"{url}/v1/jobs/{job}/resume", headers=H, timeout=30,
                                 json={"owner": f"r{i}-{k}", "takeover": True})
                with lock:
                    statuses[r.status_code] += 1
            if i == 0:
                r = session.post(f"{url}/v1/jobs/{job}/cancel", headers=H, json={})
                with lock:
                    statuses[r.status_code] += 1

        with ThreadPoolExecutor(10) as pool:
            futures = [pool.submit(beginner, i) for i in range(8)] + [pool.submit(resumer, i) for i in range(2)]
            for f in futures:
                f.result()
    assert not [s for s in statuses if s >= 500], statuses
    assert statuses[200] > 0


def test_gate_lost_races_are_bounded(client, monkeypatch):
    """`begin` used to call itself after every lost race, without a bound."""
    from conftest import auth
    from durable_ledger.gate import run as gate_begin

    rounds = []

    def always_lost(*args):
        rounds.append(1)
        return gate_begin.LOST_RACE

    client.put("/v1/jobs/lost", headers=auth(), json={})
    token = client.post("/v1/jobs/lost/lease", headers=auth(), json={"owner": "w"}).json["fencing_token"]
    monkeypatch.setattr(gate_begin, "decide_round", always_lost)
    r = client.post("/v1/operations/begin", headers=auth(), json={
        "job_id": "lost", "action": "send", "payload": {}, "fencing_token": token})
    assert (r.status_code, r.json["error"]["code"]) == (409, "gate_contended")
    assert len(rounds) == gate_begin.ROUNDS
