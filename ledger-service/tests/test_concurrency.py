"""Two real service processes (`serve`, 2 processes x 8 threads each) sharing one database.

16 client threads hammer `begin` on the same keys: exactly one `dispatch` per key across all
processes, whatever the interleaving. A lease takeover in the middle of the storm: once the
takeover has answered, the old token never writes again.
"""

import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from conftest import TOKENS
from servers import LedgerServer

KEYS = 25
H = {"Authorization": "Bearer runner-token"}


@pytest.fixture
def two_servers(database, tmp_path):
    servers = [LedgerServer(database, TOKENS, workers=2, threads=8, log_path=tmp_path / f"ledger{i}.log")
               for i in range(2)]
    try:
        for s in servers:
            s.start()
        yield servers
    finally:
        for s in servers:
            s.stop()


def _begin(session, url, job, key, token):
    r = session.post(url + "/v1/operations/begin", headers=H, timeout=30, json={
        "job_id": job, "action": "send", "operation_key": key, "payload": {"k": key}, "fencing_token": token})
    if r.status_code == 200:
        return r.json()["decision"]
    return r.json()["error"]["code"]


def test_concurrency_one_dispatch_per_key_across_processes(two_servers):
    s0 = requests.Session()
    url0 = two_servers[0].url
    s0.put(url0 + "/v1/jobs/race", headers=H, json={}).raise_for_status()
    token = s0.post(url0 + "/v1/jobs/race/lease", headers=H, json={"owner": "w"}).json()["fencing_token"]
    decisions = Counter()
    lock = threading.Lock()

    def worker(i):
        session, url = requests.Session(), two_servers[i % 2].url
        for k in range(KEYS):
            for _ in range(3):
                d = _begin(session, url, "race", f"acme:race:key-{k}", token)
                with lock:
                    decisions[(k, d)] += 1

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(worker, range(16)))
    for k in range(KEYS):
        assert decisions[(k, "dispatch")] == 1, {d: n for (kk, d), n in decisions.items() if kk == k}
        assert decisions[(k, "reconcile")] == 16 * 3 - 1
    ops = s0.get(url0 + "/v1/jobs/race/operations", headers=H).json()["operations"]
    assert len(ops) == KEYS and all(o["attempt"] == 1 for o in ops)
    assert s0.get(url0 + "/v1/jobs/race", headers=H).json()["counters"]["tool_calls"] == KEYS


def test_concurrency_stale_token_never_writes_after_takeover(two_servers):
    s0 = requests.Session()
    url0 = two_servers[0].url
    s0.put(url0 + "/v1/jobs/fence", headers=H, json={}).raise_for_status()
    old = s0.post(url0 + "/v1/jobs/fence/lease", headers=H, json={"owner": "a"}).json()["fencing_token"]
    taken_over = threading.Event()
    after_takeover = Counter()
    everything = Counter()
    lock = threading.Lock()

    def old_holder(i):
        session, url = requests.Session(), two_servers[i % 2].url
        for k in range(40):
            was_taken = taken_over.is_set()
            d = _begin(session, url, "fence", f"acme:fence:{i}-{k}", old)
            with lock:
                everything[d] += 1
                if was_taken:
                    after_takeover[d] += 1

    def taker():
        session = requests.Session()
        r = session.post(two_servers[1].url + "/v1/jobs/fence/lease", headers=H, json={"owner": "b", "takeover": True})
        assert r.json()["fencing_token"] == old + 1
        taken_over.set()

    with ThreadPoolExecutor(9) as pool:
        futures = [pool.submit(old_holder, i) for i in range(8)]
        pool.submit(taker).result()
        for f in futures:
            f.result()
    assert after_takeover and set(after_takeover) == {"stale_fencing_token"}, after_takeover
    ops = s0.get(url0 + "/v1/jobs/fence/operations", headers=H).json()["operations"]
    assert all(o["fencing_token"] == old for o in ops)
    # Every row the old holder wrote was answered `dispatch`, and nothing else was written.
    assert len(ops) == everything["dispatch"] < 8 * 40
