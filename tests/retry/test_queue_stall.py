"""(e) Queue mode: a worker frozen past its job lock, and the same order submitted again meanwhile.

    main (enqueues) ── Bull queue in Redis ──▶ worker-1: Create Order, the remote commits and holds
                                               the answer ........ SIGSTOP worker-1 (lock 3 s)
                     worker-2 starts; its stalled-job check finds worker-1's jobs unlocked:
                     n8n 2.40.7 sets maxStalledCount 0, so Bull FAILS them ("job stalled more
                     than allowable limit") and nobody runs them again; n8n's execution rows stay
                     "running" (the main only marks dangling executions crashed in its queue
                     recovery, every 180 min by default)
    the same webhook, the same orders ──▶ worker-2 runs them (the second execution of each order)
    the remote answers, SIGCONT worker-1 ──▶ it finishes its executions as if nothing happened

Counted at the remote, per order; n8n's own rows (PostgreSQL) and Bull's job records (Redis) say
what n8n did with the stalled jobs. Node 1.5: the frozen worker sends no heartbeats, so the
re-submission's Start Job takes the job over once the frozen holder's liveness lapsed (at most
10 s after its last heartbeat) instead of at once.

(e2) kill -9 of the worker running the order, mid-request, and the order submitted again at
once: another worker runs it; its Start Job waits for the dead holder's liveness to lapse (at most
10 s after its last heartbeat, the documented bound), then takes over.
"""
from __future__ import annotations

import json
import re
import secrets
import signal
import subprocess
import time
from pathlib import Path

import pytest
from flows import VARIANTS, workflow
from n8n_server import unflatten
from retry_stack import RetryStack
from pipeline_stack import HERE as STACK, Service, free_port, stop_pid, wait_http
from remote import RecordingRemote
from results import record
from localhost import psql

LOCK_MS = 3000


def redis(*args: str) -> str:
    return subprocess.run(["redis-cli", "-h", "127.0.0.1", *args], capture_output=True, text=True,
                          timeout=30).stdout


class QueueRetryStack(RetryStack):
    """The ledger, n8n main + workers in queue mode on a PostgreSQL database of their own."""

    def __init__(self, workdir, pg_database: str, bull_prefix: str):
        super().__init__(workdir, say=lambda m: print(f"[queue-retry] {m}"))
        self.pg_database, self.bull_prefix = pg_database, bull_prefix
        self.workers: dict[str, Service] = {}

    def n8n_env(self, **extra) -> dict:
        return {**super().n8n_env(), "N8N_DB": "postgres", "N8N_PG_DATABASE": self.pg_database,
                "EXECUTIONS_MODE": "queue", "QUEUE_BULL_REDIS_HOST": "127.0.0.1", "QUEUE_BULL_REDIS_PORT": "6379",
                "QUEUE_BULL_PREFIX": self.bull_prefix, "N8N_PROXY_HOPS": "0",
                # n8n's Redis cache too (webhooks, published workflows, roles): its default prefix
                # is every queue-mode n8n's on this machine, across suites and runs
                "N8N_REDIS_KEY_PREFIX": f"n8n-{self.bull_prefix}",
                # a worker renews its job lock every second; a lock not renewed for 3 s is lost and
                # the next stalled-job check (every second, by any live worker) finds the job
                "QUEUE_WORKER_LOCK_DURATION": str(LOCK_MS), "QUEUE_WORKER_LOCK_RENEW_TIME": "1000",
                "QUEUE_WORKER_STALLED_INTERVAL": "1000",
                # keep Bull's records of ended jobs (n8n removes them by default) so that the test
                # can read what Bull did with the stalled ones
                "N8N_EXECUTIONS_QUEUE_KEEP_LAST_COMPLETED": "100", "N8N_EXECUTIONS_QUEUE_KEEP_LAST_FAILED": "100",
                **extra}

    def start_worker(self, name: str, concurrency: int):
        health = free_port()
        env = self.n8n_env(QUEUE_HEALTH_CHECK_ACTIVE="true", QUEUE_HEALTH_CHECK_PORT=str(health),
                           N8N_PORT=str(free_port()))
        svc = Service(name, ["bash", str(STACK / "n8n.sh"), "n8n", "worker", f"--concurrency={concurrency}"], env,
                      self.workdir / f"{name}.log")
        self.workers[name] = svc
        self.services.append(svc)
        return f"http://127.0.0.1:{health}/healthz/readiness", svc

    def worker_log(self, name: str) -> str:
        return self.workers[name].log_path.read_text(errors="replace")

    def webhooks(self) -> set[str]:
        return set(psql('SELECT "webhookPath" FROM webhook_entity', self.pg_database).split())

    def activate(self, workflow_ids, paths, timeout: float = 60):
        for wf_id in workflow_ids:
            wf = self.rest.get(f"{self.n8n_url}/rest/workflows/{wf_id}", timeout=30).json()["data"]
            r = self.rest.post(f"{self.n8n_url}/rest/workflows/{wf_id}/activate",
                               json={"versionId": wf["versionId"]}, timeout=30)
            assert r.status_code == 200, r.text
        deadline = time.monotonic() + timeout
        while not set(paths) <= self.webhooks() and time.monotonic() < deadline:
            time.sleep(0.3)
        assert set(paths) <= self.webhooks(), self.server_log()[-3000:]

    def executions(self, workflow_id: str | None = None) -> list[dict]:
        rows = psql('SELECT id, status, finished, coalesce("retryOf", \'\'), "workflowId", mode '
                    'FROM execution_entity ORDER BY id', self.pg_database)
        out = [{"id": i, "status": s, "finished": f == "t", "retry_of": r or None, "workflow_id": w, "mode": m}
               for i, s, f, r, w, m in (line.split("|") for line in rows.split("\n") if line)]
        return [e for e in out if workflow_id is None or e["workflow_id"] == workflow_id]

    def result_data(self, execution_id: str) -> dict:
        data = psql(f'SELECT data FROM execution_data WHERE "executionId" = {int(execution_id)}', self.pg_database)
        return ((unflatten(data) or {}).get("resultData") or {}) if data.strip() else {}

    def bull_jobs(self) -> dict[str, dict]:
        """executionId -> Bull's record of its job (state and failedReason), read from Redis."""
        out = {}
        for key in redis("--scan", "--pattern", f"{self.bull_prefix}:jobs:*").split():
            tail = key.rsplit(":", 1)[1]
            if not tail.isdigit():
                continue
            fields = redis("hgetall", key).split("\n")
            job = dict(zip(fields[0::2], fields[1::2]))
            try:
                eid = str(json.loads(job.get("data") or "{}").get("executionId"))
            except ValueError:
                continue
            out[eid] = {"job": tail, "failed_reason": job.get("failedReason") or None,
                        "finished": bool(job.get("finishedOn"))}
        return out


@pytest.fixture(scope="module")
def queue(tmp_path_factory):
    subprocess.run(["bash", str(STACK / "ensure-services.sh"), "postgres", "redis"], check=True)
    tag = secrets.token_hex(4)
    db, prefix = f"n8n_retry_{tag}", f"bull-rt-{tag}"
    psql(f"CREATE DATABASE {db}")
    remote = RecordingRemote()
    st = QueueRetryStack(tmp_path_factory.mktemp("queue-retry"), db, prefix)
    try:
        st.start()
        ids = [f"qt{v}" for v in VARIANTS]
        st.import_workflows([workflow(v, f"qt{v}", f"qt{v}", remote.url) for v in VARIANTS])
        # worker-1 runs exactly the three orders at once: with a free slot, Bull keeps a blocking
        # pop open in Redis, which hands the next job to the frozen worker (it stalls too)
        readiness, w1 = st.start_worker("n8n-worker-1", concurrency=len(VARIANTS))
        st.start_server()
        wait_http(readiness, timeout=120, proc=w1.proc, log=w1.log_path)
        st.activate(ids, ids)
        yield st, remote
    finally:
        for svc in st.workers.values():
            stop_pid(svc.pid, signal.SIGCONT)
        remote.close()
        st.stop()
        psql(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
        keys = redis("--scan", "--pattern", f"*{prefix}*").split()
        if keys:
            redis("del", *keys)


def wait_for(what: str, cond, timeout: float, detail=lambda: ""):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(0.3)
    raise TimeoutError(f"{what} within {timeout} s: {detail()}")


MAX_STALLED = "This execution failed to be processed too many times and will no longer retry."
EXPECT = {
    "plain": {"writes": 2, "what": "the resubmitted order runs on worker-2 and writes again; worker-1, resumed, "
              "finds its request timed out (error)"},
    "begin": {"writes": 1, "reasons": ["stale_fencing_token", "needs_review"],
              "what": "the resubmitted order stops at Begin Step (sent, outcome unknown, no reconciler: review "
              "queue); worker-1, resumed, times out and its Record Outcome is refused: stale_fencing_token"},
    "gated": {"writes": 1, "lookups": 1, "reasons": ["stale_fencing_token", None],
              "what": "the resubmitted order waits until the frozen holder's heartbeats lapse, takes over: the "
              "Look Up finds worker-1's write, Done Before; worker-1, resumed, times out and its outcome report "
              "is refused: stale_fencing_token"},
}


def test_e_worker_stopped_past_its_lock_and_the_order_resubmitted(queue):
    st, remote = queue
    orders = {v: f"e-{v}" for v in VARIANTS}
    for o in orders.values():
        remote.plan[o] = ["hold"]
    for v, o in orders.items():
        assert st.fire(f"qt{v}", o) == 200
    assert remote.wait_held(len(orders)), remote.requests
    first = {v: st.executions(f"qt{v}")[0] for v in VARIANTS}
    assert "Worker started execution" in st.worker_log("n8n-worker-1")

    w1 = st.workers["n8n-worker-1"]
    stop_pid(w1.pid, signal.SIGSTOP)  # frozen mid-request: no lock renewal, no answer read
    stopped_at = time.monotonic()
    readiness, w2 = st.start_worker("n8n-worker-2", concurrency=5)
    wait_http(readiness, timeout=120, proc=w2.proc, log=w2.log_path)
    stalled = wait_for("Bull failing the stalled jobs", lambda: all(
        (st.bull_jobs().get(e["id"]) or {}).get("failed_reason") for e in first.values()) and st.bull_jobs(),
        timeout=30, detail=st.bull_jobs)
    stall_s = round(time.monotonic() - stopped_at, 1)
    wait_for("n8n failing the stalled executions", lambda: all(
        st.executions(f"qt{v}")[0]["status"] == "error" for v in VARIANTS), timeout=15, detail=st.executions)
    while_stopped = {v: st.executions(f"qt{v}")[0]["status"] for v in VARIANTS}
    message_while_stopped = {v: st.error_of(first[v]["id"]) for v in VARIANTS}

    # the same orders again, while worker-1 is still frozen: only worker-2 can run them
    for v, o in orders.items():
        assert st.fire(f"qt{v}", o) == 200
    second = {v: st.wait_executions(f"qt{v}", 2)[1] for v in VARIANTS}
    rerun_writes = {v: len(remote.writes(o)) for v, o in orders.items()}

    remote.release()
    stop_pid(w1.pid, signal.SIGCONT)
    # worker-1 goes on with the executions Bull failed: its requests' timers fire before it reads
    # the answers waiting in its sockets, so each one times out
    wait_for("worker-1 finishing its executions", lambda: {e["id"] for e in first.values()} <= set(
        re.findall(r"Worker finished execution (\d+)", st.worker_log("n8n-worker-1"))), timeout=60,
        detail=lambda: st.worker_log("n8n-worker-1")[-2000:])
    finals = {v: st.executions(f"qt{v}")[0] for v in VARIANTS}
    ran_by_2 = set(re.findall(r"Worker started execution (\d+)", st.worker_log("n8n-worker-2")))
    rows = {}
    for v, o in orders.items():
        e1, e2 = finals[v], second[v]
        rows[v] = {"order_id": o, "writes": len(remote.writes(o)), "lookups": len(remote.lookups(o)),
                   "writes_before_worker1_resumed": rerun_writes[v],
                   "bull_failed_reason": stalled[e1["id"]]["failed_reason"], "stall_detected_s": stall_s,
                   "status_while_stopped": while_stopped[v], "message_while_stopped": message_while_stopped[v],
                   "executions": [e1["status"], e2["status"]],
                   "reasons": [st.reason_of(e1["id"]), st.reason_of(e2["id"])],
                   "nodes_run": [st.nodes_run(e1["id"]), st.nodes_run(e2["id"])],
                   "second_ran_on_worker2": e2["id"] in ran_by_2, "first_rerun_by_n8n": e1["id"] in ran_by_2}
        record("e-queue", "(e) queue mode: worker SIGSTOPped past its lock, the order resubmitted meanwhile", v,
               {**rows[v], "what": EXPECT[v]["what"]})
    for v, seen in rows.items():
        assert seen["bull_failed_reason"] == "job stalled more than allowable limit", seen
        # the main fails the execution as soon as Bull fails its job; nobody runs it again, and
        # worker-1's own ending overwrites that status later
        assert seen["status_while_stopped"] == "error" and not seen["first_rerun_by_n8n"], seen
        assert seen["message_while_stopped"].startswith(MAX_STALLED), seen
        assert seen["second_ran_on_worker2"], seen
        for k, val in EXPECT[v].items():
            if k != "what":
                assert seen[k] == val, (v, k, seen)


KILL_EXPECT = {
    "plain": {"writes": 2, "what": "the order submitted again at once runs on another worker and writes again"},
    "begin": {"writes": 1, "reason": "needs_review", "what": "the re-submission waits for the dead holder's "
              "liveness to lapse, takes over; Begin Step finds the step sent, outcome unknown, no lookup: review queue"},
    "gated": {"writes": 1, "reason": None, "what": "the re-submission waits for the dead holder's liveness to "
              "lapse, takes over: the Look Up finds the killed worker's write, Done Before"},
}


def start_job_wait(st, execution_id: str) -> float:
    """How long the execution's Start Job waited for a live holder (node 1.4+), 0 if it did not."""
    runs = (st.result_data(execution_id).get("runData") or {}).get("Start Job") or []
    items = ((runs[0].get("data") or {}).get("main") or [[]])[0] if runs else []
    return float((items[0]["json"] if items else {}).get("waited_for_holder_s") or 0)


def exited(svc) -> float:
    """Seconds until no process of the killed worker's group is left. kill -9 returns before the
    process has exited, and until it has closed its files Redis keeps the dead worker's blocking pop
    open: a job enqueued in those milliseconds is handed to it, and Bull fails it as stalled once its
    lock lapses (n8n: "failed to be processed too many times"), a loss of n8n's own, before any
    Durable Step node runs. Measured here: the plain order re-submitted 0.1 s after the kill went
    that way. The re-submission below goes out as soon as the worker is gone."""
    t0 = time.monotonic()
    svc.proc.wait(30)
    while live_in_group(svc.pid):
        if time.monotonic() - t0 > 30:
            raise TimeoutError(f"{svc.name} still has processes 30 s after kill -9")
        time.sleep(0.02)
    return round(time.monotonic() - t0, 2)


def live_in_group(pgid: int) -> bool:
    """Whether a process of the group is still there and not a zombie (a zombie has closed its files)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def test_e2_worker_killed_mid_request_and_the_order_submitted_again_at_once(queue):
    st, remote = queue
    orders = {v: f"e2-{v}" for v in VARIANTS}
    for o in orders.values():
        remote.plan[o] = ["hold"]
    before = {v: len(st.executions(f"qt{v}")) for v in VARIANTS}
    held = remote.held
    for v, o in orders.items():
        assert st.fire(f"qt{v}", o) == 200
    assert remote.wait_held(held + len(orders)), remote.requests
    first = {v: st.executions(f"qt{v}")[before[v]] for v in VARIANTS}
    running = {name for name in st.workers for e in first.values()
               if f"Worker started execution {e['id']}" in st.worker_log(name)}
    for name in running:  # kill -9: no shutdown hook, no last heartbeat, no release
        stop_pid(st.workers[name].pid, signal.SIGKILL)
    killed_at = time.monotonic()
    exited_s = {name: exited(st.workers[name]) for name in running}
    if all(name in running for name in st.workers):
        readiness, w3 = st.start_worker("n8n-worker-3", concurrency=5)
        wait_http(readiness, timeout=120, proc=w3.proc, log=w3.log_path)
    remote.release()  # the killed requests' writes are committed; their answers go nowhere
    for v, o in orders.items():
        assert st.fire(f"qt{v}", o) == 200
    resubmitted_after_s = round(time.monotonic() - killed_at, 1)
    second = {v: wait_for(f"qt{v}'s re-submission to end", lambda v=v: (lambda rows: rows[before[v] + 1] if len(
        rows) > before[v] + 1 and rows[before[v] + 1]["status"] in ("success", "error") else None)(
        st.executions(f"qt{v}")), timeout=90, detail=st.executions) for v in VARIANTS}
    rows = {}
    for v, o in orders.items():
        e2 = second[v]
        rows[v] = {"order_id": o, "writes": len(remote.writes(o)), "killed_workers": sorted(running),
                   "resubmitted_after_s": resubmitted_after_s, "worker_exited_s": exited_s,
                   "status": e2["status"],
                   "reason": st.reason_of(e2["id"]), "waited_for_dead_holder_s": start_job_wait(st, e2["id"]),
                   "review": sum(1 for op in st.ledger("GET", f"/v1/jobs/{o}/operations")["operations"]
                                 if op["state"] == "NEEDS_REVIEW") if v != "plain" else 0}
        record("e2-queue-kill", "(e) queue mode: kill -9 of the worker mid-request, the order submitted again at once",
               v, {**rows[v], "what": KILL_EXPECT[v]["what"]})
    print("\nDURABLE_QUEUE_KILL " + json.dumps(rows, sort_keys=True))
    for v, seen in rows.items():
        assert seen["writes"] == KILL_EXPECT[v]["writes"], (v, seen)
        if v != "plain":
            assert seen["reason"] == KILL_EXPECT[v]["reason"], (v, seen)
            # the documented bound: a dead holder is taken over at most 10 s after its last heartbeat
            assert seen["waited_for_dead_holder_s"] <= 10.5 + 1.0, (v, seen)
    assert rows["gated"]["status"] == "success" and rows["gated"]["review"] == 0, rows
