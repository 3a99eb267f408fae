"""Resume attempts count resumes that took the lease, nothing else (issue 12, build item 5).

A resume refused with 409 lease_held (another executor holds a live lease) used to consume the
job's max_resume_attempts: an intruder could exhaust the owner's budget without ever running.
"""

import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import requests

from conftest import auth
from test_concurrency import two_servers  # noqa: F401 - fixture

H = {"Authorization": "Bearer runner-token"}


def _resume(client, job, owner, **extra):
    return client.post(f"/v1/jobs/{job}/resume", headers=auth(), json={"owner": owner, "ttl_s": 60, **extra})


def _attempts(client, job):
    return client.get(f"/v1/jobs/{job}", headers=auth()).get_json()["counters"]["resume_attempts"]


def test_refused_resumes_do_not_consume_the_owners_budget(client):
    client.put("/v1/jobs/r1", json={"budgets": {"max_resume_attempts": 2}}, headers=auth())
    first = _resume(client, "r1", "exec-a")
    assert first.status_code == 200 and first.get_json()["halted"] is False
    token = first.get_json()["fencing_token"]

    refused = [_resume(client, "r1", "intruder-b") for _ in range(20)]
    assert [(r.status_code, r.get_json()["error"]["code"]) for r in refused] == [(409, "lease_held")] * 20
    assert _attempts(client, "r1") == 1  # the 20 refusals counted nothing

    again = _resume(client, "r1", "exec-a")  # the owner still has its second attempt
    assert again.status_code == 200, again.get_json()
    assert (again.get_json()["halted"], again.get_json()["budget"]) == (False, None)
    assert again.get_json()["fencing_token"] == token
    assert _attempts(client, "r1") == 2

    # After the lease ends, B's resume is legitimate: it takes the lease and counts (the third of 2).
    assert client.delete("/v1/jobs/r1/lease", headers=auth(),
                         json={"owner": "exec-a", "fencing_token": token}).status_code == 204
    third = _resume(client, "r1", "intruder-b")
    assert third.status_code == 200
    assert third.get_json()["fencing_token"] == token + 1
    assert (third.get_json()["halted"], third.get_json()["budget"]) == (True, "max_resume_attempts")
    assert _attempts(client, "r1") == 3  # == the number of resumes that answered 200




ROUNDS, THREADS, PER_THREAD = 5, 12, 4


def test_concurrent_resumes_count_exactly_the_successful_ones(two_servers):  # noqa: F811
    """Owner and intruder resume concurrently through 2 server processes: every owner resume
    takes (extends) the lease and counts once, no count is lost, no intruder resume counts."""
    s0, url0 = requests.Session(), two_servers[0].url
    for rnd in range(ROUNDS):
        job = f"storm-{rnd}"
        s0.put(f"{url0}/v1/jobs/{job}", headers=H, json={"budgets": {"max_resume_attempts": 1000}}).raise_for_status()
        r = s0.post(f"{url0}/v1/jobs/{job}/resume", headers=H, json={"owner": "exec-a", "ttl_s": 120})
        assert r.status_code == 200, r.text
        seen, lock = Counter(), threading.Lock()

        def worker(i, job=job, seen=seen, lock=lock):
            session, url = requests.Session(), two_servers[i % 2].url
            owner = "exec-a" if i % 2 == 0 else "intruder-b"
            for _ in range(PER_THREAD):
                r = session.post(f"{url}/v1/jobs/{job}/resume", headers=H, timeout=60,
                                 json={"owner": owner, "ttl_s": 120})
                outcome = r.status_code if r.status_code == 200 else r.json()["error"]["code"]
                with lock:
                    seen[(owner, outcome)] += 1

        with ThreadPoolExecutor(THREADS) as pool:
            list(pool.map(worker, range(THREADS)))
        per_owner = THREADS // 2 * PER_THREAD
        assert seen == Counter({("exec-a", 200): per_owner, ("intruder-b", "lease_held"): per_owner}), seen
        counted = s0.get(f"{url0}/v1/jobs/{job}", headers=H).json()["counters"]["resume_attempts"]
        assert counted == 1 + per_owner  # the first resume plus every concurrent owner resume
