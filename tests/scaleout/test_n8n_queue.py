"""n8n in queue mode (issue 9, part 4): one main + two workers, Redis (Bull), n8n on PostgreSQL,
running the article pipeline for several jobs at once (one of them twice at the same moment)
without a duplicate in WordPress.

    POST /webhook/durable-article {job_id} x4 ──▶ n8n main (EXECUTIONS_MODE=queue, enqueues only)
                                                        │ Bull queue in Redis
                                      ┌─────────────────┴─────────────────┐
                                 n8n worker 1                        n8n worker 2
                                      └──▶ ledger (gate, fencing) ──▶ proxy ──▶ WordPress

Why a webhook: in n8n 2.40.7 `n8n execute` ignores queue mode ("CLI command `execute` does not
support queue mode. Falling back to regular mode.") and runs in its own process, so it proves
nothing about workers. A production webhook received by the main is enqueued and run by a worker
("Worker started execution N" in that worker's log). The workflow is the shipped one with its
Manual Trigger swapped for a Webhook node and `job_id` taken from the request body, published
with `n8n publish:workflow` before `n8n start`. In 2.40.7 the main applies published workflows
asynchronously (workflow publication service: a startup reconcile fills an outbox that a poller
applies, every 15 s by default, here 1 s); the test waits for the webhook row before POSTing.

Queue mode needs a database every process shares (SQLite cannot be shared across processes):
a PostgreSQL database unique to the run, dropped afterwards; a Bull key prefix unique to the run.
All three processes share one N8N_USER_FOLDER (the Durable Step package is extracted there once)
and one N8N_ENCRYPTION_KEY, each with its own N8N_PORT / QUEUE_HEALTH_CHECK_PORT /
N8N_RUNNERS_BROKER_PORT.
"""
from __future__ import annotations

import copy
import json
import re
import secrets
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest
import requests

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent

from pipeline_stack import HERE as STACK, PipelineStack, Service, free_port, wait_http  # noqa: E402
from localhost import psql  # noqa: E402

WORKFLOW_ID = "wfqueuearticle"
WEBHOOK_PATH = "durable-article"
JOBS = ("q-alpha", "q-beta", "q-gamma")
TRIGGERS = ("q-alpha", "q-alpha", "q-beta", "q-gamma")  # q-alpha twice at the same moment


class QueueStack(PipelineStack):
    """The pipeline stack whose n8n runs in queue mode on PostgreSQL: every n8n command (import,
    publish, start, worker) sees the same database, Redis prefix and encryption key."""

    def __init__(self, *a, pg_database: str, bull_prefix: str, **kw):
        super().__init__(*a, **kw)
        self.pg_database, self.bull_prefix = pg_database, bull_prefix
        self.n8n_procs: dict[str, Service] = {}

    def n8n_env(self, **extra) -> dict:
        return {**super().n8n_env(), "N8N_DB": "postgres", "N8N_PG_DATABASE": self.pg_database,
                "EXECUTIONS_MODE": "queue", "QUEUE_BULL_REDIS_HOST": "127.0.0.1", "QUEUE_BULL_REDIS_PORT": "6379",
                "QUEUE_BULL_PREFIX": self.bull_prefix, "N8N_PROXY_HOPS": "0",
                # n8n's Redis cache too (webhooks, published workflows, roles): its default prefix
                # is every queue-mode n8n's on this machine, across suites and runs
                "N8N_REDIS_KEY_PREFIX": f"n8n-{self.bull_prefix}",
                # 2.40.7 activates published workflows through its publication outbox, polled every
                # 15 s by default: a webhook answers 404 until the main has applied it.
                "N8N_WORKFLOW_PUBLICATION_OUTBOX_POLL_INTERVAL_MS": "1000", **extra}

    def start_main(self) -> str:
        port = free_port()
        env = self.n8n_env(N8N_PORT=str(port), N8N_LISTEN_ADDRESS="127.0.0.1")
        svc = Service("n8n-main", ["bash", str(STACK / "n8n.sh"), "n8n", "start"], env, self.workdir / "n8n-main.log")
        self.n8n_procs["main"] = svc
        self.services.append(svc)
        self.main_url = f"http://127.0.0.1:{port}"
        return self.main_url

    def start_worker(self, name: str) -> str:
        health = free_port()
        env = self.n8n_env(QUEUE_HEALTH_CHECK_ACTIVE="true", QUEUE_HEALTH_CHECK_PORT=str(health))
        svc = Service(name, ["bash", str(STACK / "n8n.sh"), "n8n", "worker", "--concurrency=5"], env,
                      self.workdir / f"{name}.log")
        self.n8n_procs[name] = svc
        self.services.append(svc)
        return f"http://127.0.0.1:{health}/healthz/readiness"

    def log_of(self, name: str) -> str:
        return self.n8n_procs[name].log_path.read_text(errors="replace")


def webhook_workflow(stack: QueueStack) -> dict:
    """The shipped pipeline, started by a production webhook; job_id comes from the request body."""
    wf = copy.deepcopy(stack.workflow(WORKFLOW_ID, "from-webhook", proxy_url=stack.proxy_url))
    wf["name"] = "Article pipeline (queue mode)"
    trigger = next(n for n in wf["nodes"] if n["type"] == "n8n-nodes-base.manualTrigger")
    trigger.update(type="n8n-nodes-base.webhook", typeVersion=2, webhookId=str(uuid.uuid4()),
                   parameters={"httpMethod": "POST", "path": WEBHOOK_PATH, "responseMode": "onReceived",
                               "options": {}})
    cfg = next(n for n in wf["nodes"] if n["name"] == "Config")
    for a in cfg["parameters"]["assignments"]["assignments"]:
        if a["name"] == "job_id":
            a["value"] = "={{ $json.body.job_id }}"
        if a["name"] == "topic":
            a["value"] = "={{ 'Queue mode article ' + $json.body.job_id }}"
    return wf


@pytest.fixture(scope="module")
def queue_stack(wordpress_site, tmp_path_factory):
    subprocess.run(["bash", str(STACK / "ensure-services.sh"), "postgres", "redis"], check=True)
    tag = secrets.token_hex(4)
    pg_database = f"n8n_queue_{tag}"
    psql(f"CREATE DATABASE {pg_database}")
    st = QueueStack(tmp_path_factory.mktemp("n8n-queue"), wp_state=Path(wordpress_site.state_file),
                    say=lambda m: print(f"[queue] {m}"), pg_database=pg_database, bull_prefix=f"bull-ds-{tag}")
    try:
        t0 = time.monotonic()
        st.start()  # WordPress, ledger, proxy, stand-in; n8n: package + credentials into PostgreSQL
        st.import_workflows([webhook_workflow(st)], publish=[WORKFLOW_ID])
        # Workers first: once the main is up, webhooks are enqueued, and someone must pick them up.
        readiness = [st.start_worker(f"n8n-worker-{i}") for i in (1, 2)]
        st.start_main()
        for name, url in zip(("n8n-worker-1", "n8n-worker-2"), readiness):
            wait_http(url, timeout=120, proc=st.n8n_procs[name].proc, log=st.n8n_procs[name].log_path)
        wait_http(st.main_url + "/healthz/readiness", timeout=120, proc=st.n8n_procs["main"].proc,
                  log=st.n8n_procs["main"].log_path)
        wait_webhook_registered(st)
        st.boot_seconds = round(time.monotonic() - t0, 1)
        yield st
    finally:
        st.stop()
        psql(f"DROP DATABASE IF EXISTS {pg_database} WITH (FORCE)")
        keys = subprocess.run(["redis-cli", "-h", "127.0.0.1", "--scan", "--pattern", f"*bull-ds-{tag}*"],
                              capture_output=True, text=True).stdout.split()
        if keys:
            subprocess.run(["redis-cli", "-h", "127.0.0.1", "del", *keys], capture_output=True)


def wait_webhook_registered(stack: QueueStack, timeout: float = 90):
    """`n8n start` applies published workflows asynchronously (publication outbox): wait until
    the webhook row exists instead of POSTing into a 404."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if psql(f"SELECT 1 FROM webhook_entity WHERE \"webhookPath\" = '{WEBHOOK_PATH}'", stack.pg_database).strip():
            return
        time.sleep(0.5)
    raise TimeoutError(f"webhook {WEBHOOK_PATH} not registered within {timeout} s:\n{stack.log_of('main')[-3000:]}")


def trigger_all(stack: QueueStack, jobs) -> list[int]:
    """POST the production webhook for every job at the same moment (a barrier releases them)."""
    barrier = threading.Barrier(len(jobs))
    statuses = [None] * len(jobs)

    def post(i, job_id):
        barrier.wait()
        r = requests.post(f"{stack.main_url}/webhook/{WEBHOOK_PATH}", json={"job_id": job_id}, timeout=60)
        statuses[i] = r.status_code

    threads = [threading.Thread(target=post, args=(i, j)) for i, j in enumerate(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    return statuses


def executions(stack: QueueStack) -> list[dict]:
    rows = psql('SELECT id, status, mode, "stoppedAt" IS NOT NULL FROM execution_entity ORDER BY id',
                stack.pg_database)
    # "waiting": parked in the approval wait (Wait node, resumed by the ledger once approved).
    return [{"id": int(i), "status": s, "mode": m, "stopped": done == "t" or s == "waiting"}
            for i, s, m, done in (line.split("|") for line in rows.split())]


def execution_facts(stack: QueueStack, execution_id: int) -> dict:
    """Which job an execution ran (the webhook body is in its data) and whether the ledger fenced it."""
    data = psql(f'SELECT data FROM execution_data WHERE "executionId" = {execution_id}', stack.pg_database)
    job = next((j for j in JOBS if f'"{j}"' in data), None)
    return {"job_id": job, "fenced": "stale_fencing_token" in data}


def wait_executions(stack: QueueStack, n: int, timeout: float = 240) -> list[dict]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = executions(stack)
        if len(rows) >= n and all(r["stopped"] for r in rows):
            return rows
        time.sleep(0.5)
    raise TimeoutError(f"executions not finished within {timeout} s: {executions(stack)}")


def ran_by(stack: QueueStack) -> dict[int, str]:
    """Execution id -> the worker whose log says it started it."""
    out = {}
    for name in ("n8n-worker-1", "n8n-worker-2"):
        for eid in re.findall(r"Worker started execution (\d+)", stack.log_of(name)):
            out[int(eid)] = name
    return out


def test_n8n_queue_mode_two_workers_run_pipeline_without_duplicates(queue_stack):
    st = queue_stack
    t0 = time.monotonic()
    statuses = trigger_all(st, TRIGGERS)
    assert statuses == [200] * len(TRIGGERS), statuses
    rows = wait_executions(st, len(TRIGGERS))
    # Any job a fenced-out pair did not finish runs again (one round, still through the queue).
    pending = [j for j in JOBS if st.ledger("GET", f"/v1/jobs/{j}")["phase"] != "AWAITING_APPROVAL"]
    if pending:
        assert trigger_all(st, pending) == [200] * len(pending)
        rows = wait_executions(st, len(TRIGGERS) + len(pending))
    seconds = round(time.monotonic() - t0, 1)

    workers = ran_by(st)
    assert sorted(workers) == [r["id"] for r in rows], (workers, rows)  # every execution ran on a worker
    assert set(workers.values()) == {"n8n-worker-1", "n8n-worker-2"}, workers  # ... and both workers worked
    assert "Worker started execution" not in st.log_of("main")  # the main only enqueued

    for r in rows:
        r.update(execution_facts(st, r["id"]), worker=workers[r["id"]])
    # Both runs of the doubled job were enqueued together; whichever lost the lease was refused by
    # the ledger (409 stale_fencing_token) and ended in error. Every other execution reached the
    # approval and waits for it (status "waiting").
    failed = [r for r in rows if r["status"] not in ("success", "waiting")]
    assert all(r["fenced"] for r in failed), failed
    summary = {"boot_s": st.boot_seconds, "run_s": seconds, "executions": rows, "ran_by": workers,
               "retriggered": pending, "jobs": {}}
    for job_id in JOBS:
        wp = st.wordpress_counts(job_id, st.article(job_id))
        report = st.report(job_id)
        summary["jobs"][job_id] = {"posts": wp["posts"], "drafts": wp["drafts"], "media": wp["media"],
                                   "published": wp["published"], "resource_packs": wp.get("resource_packs"),
                                   "phase": report["phase"], "counts": report["counts"]}
        assert (wp["posts"], wp["drafts"], wp["media"], wp["published"]) == (1, 1, 3, 0), (job_id, wp)
        assert wp["featured_is_upload"] and wp["seo_verified"] and wp["resource_packs"] == 1, (job_id, wp)
        assert report["counts"]["unknown"] == 0, report["operations"]["unknown"]
        assert report["phase"] == "AWAITING_APPROVAL"
        assert [o["action"] for o in report["operations"]["pending_human"]] == ["publish"]
    metrics = st.ledger("GET", "/v1/metrics/acceptance")
    summary["ledger"] = {k: metrics[k] for k in ("operations_confirmed_twice", "duplicate_remote_ids",
                                                 "unknown_operations_left", "refusals_by_code")}
    assert metrics["operations_confirmed_twice"] == 0 and metrics["duplicate_remote_ids"] == []
    assert metrics["unknown_operations_left"] == 0
    print("\nDURABLE_N8N_QUEUE " + json.dumps(summary, indent=1))
