"""Chaos soak (issue 9, part 2): N article jobs through the real n8n pipeline against a real
WordPress, interrupted at random points, re-run until each reaches the approval wait, swept,
then counted from WordPress itself and from the ledger's job reports. Prints one JSON report.

    python tests/soak/soak.py            # SOAK_JOBS (50), SOAK_MAX_SECONDS (1800), SOAK_SEED

Interruption kinds, one per job (a shuffled, balanced plan; a few jobs run clean as controls):

    n8n_kill        n8n (and its task runner) SIGKILLed after the K-th ledger request of the run
    ledger_kill     the ledger server SIGKILLed after the K-th ledger request, restarted on the
                    same database and port; the run meets a dead ledger and fails
    response_drop   the TCP proxy between the publishing proxy and WordPress lets the j-th write
                    (of the run's 6) reach WordPress and replaces its answer with a reset
    competing       two n8n executions of the same job started at once; Start Job takes over,
                    the ledger (and WordPress) refuse the fenced-out run
    hostile         a run during which hostile runners (tests/soak/hostile.py) send forged writes
                    straight to the publishing proxy: a runner of another tenant (the victim's
                    keys and job id with a huge fencing token; its own dispatched operation
                    carried onto the victim's job or post) and a fenced-out runner of the same
                    tenant (it held the lease before the run took it over: stale token, other
                    body, no token, settled operations). Every one must be refused (4xx + code)
    none            a clean run (control)

Options (environment or flags):

    SOAK_BACKEND=sqlite|postgres   the ledger's database (postgres: a database unique to the run
                                   on 127.0.0.1:5432, dropped at the end)
    SOAK_N8N=regular|queue         regular: one `n8n execute` per run. queue: n8n main + 2 workers
                                   on Redis (n8n itself on its own unique PostgreSQL database), each
                                   run a production webhook enqueued by the main, run by a worker;
                                   n8n_kill SIGKILLs the worker running it (and starts it again)
    SOAK_HOSTILE=kind|all          kind: hostile runners target only the `hostile` jobs; all: every
                                   job's runs, whatever their interruption

K is drawn uniformly over the ledger requests a whole run makes (counted by a relay in front of
the ledger), so interruptions land anywhere: before a Begin Step, between the dispatch and the
remote write, between the write and its receipt, before a checkpoint.

                 t_interrupt                                  t_recovered
    run 1 ──────────X            run 2 (re-run) ─────────────────▶ Wait for Approval
                    └──────────── time to recover ────────────┘

Nothing here trusts the ledger's word for the counters: drafts and media are counted in
WordPress (durable-ops job lookup + REST), and every WordPress object must match a CONFIRMED
ledger operation with the same remote id.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import quote

import requests

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent
REPO = TESTS.parent

from pipeline_stack import (  # noqa: E402
    LEDGER_BIN, SITE, TENANT, PipelineStack, outputs_of, parse_run, remote_job_id, run_error, stop_pid,
    wait_http,
)
from support.netfaults import LossyProxy  # noqa: E402
from hostile import HostileRunners  # noqa: E402
from localhost import psql  # noqa: E402

INTRUDER = "intruder"  # the other tenant: a runner token with rights on the same site

WRITES_PER_RUN = 6  # POSTs to WordPress in a clean run: 3 media, draft, SEO, resource pack
KINDS = ("n8n_kill", "ledger_kill", "response_drop", "competing", "hostile")
PHASES = ["SOURCES_COLLECTED", "BODY_GENERATED", "QA_PASSED", "IMAGES_READY", "MEDIA_UPLOADED",
          "DRAFT_CONFIRMED", "SEO_VERIFIED", "AWAITING_APPROVAL", "PUBLISHED"]
PHASE_OF_ACTION = {"generate_article": "BODY_GENERATED", "generate_image": "IMAGES_READY",
                   "upload_media": "MEDIA_UPLOADED", "create_draft": "DRAFT_CONFIRMED",
                   "set_seo": "SEO_VERIFIED", "add_resource_pack": "SEO_VERIFIED", "publish": "PUBLISHED"}
# What must be CONFIRMED in the ledger (and exist in WordPress) for a phase to be legitimate.
PHASE_REQUIRES = {"BODY_GENERATED": ["generate_article"],
                  "IMAGES_READY": ["generate_image:hero", "generate_image:inline-1", "generate_image:inline-2"],
                  "MEDIA_UPLOADED": ["upload_media:hero", "upload_media:inline-1", "upload_media:inline-2"],
                  "DRAFT_CONFIRMED": ["create_draft"], "SEO_VERIFIED": ["set_seo", "add_resource_pack"]}


def log(msg):
    print(f"[soak {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class SoakStack(PipelineStack):
    """The pipeline stack with a response-dropping TCP proxy between the publishing proxy and
    WordPress, a relay in front of the ledger (it counts the run's ledger requests), and a
    runner token of another tenant (the intruder) with rights on the site."""

    def __init__(self, *a, **kw):
        kw.setdefault("extra_tokens", {INTRUDER: f"{INTRUDER}:runner:{SITE}"})
        super().__init__(*a, **kw)

    def _start_ledger_and_proxy(self):
        wp_port = int(self.wp["url"].rsplit(":", 1)[1].split("/")[0])
        self.lossy = LossyProxy("127.0.0.1", wp_port)
        self.wp_url_for_proxy = self.lossy.url
        super()._start_ledger_and_proxy()

    def stop(self):
        super().stop()
        self.lossy.close()


class Run:
    """One `n8n execute` in the background (its own process group, so SIGKILL takes the task
    runner too)."""

    def __init__(self, stack: PipelineStack, workflow_id: str):
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen(
            ["bash", str(REPO / "stack" / "n8n.sh"), "n8n", "execute", f"--id={workflow_id}", "--rawOutput"],
            env=stack.n8n_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            start_new_session=True)
        self.out: list[str] = []
        self._reader = threading.Thread(target=lambda: self.out.append(self.proc.communicate()[0]), daemon=True)
        self._reader.start()
        self.killed = False

    def running(self):
        return self.proc.poll() is None

    def kill(self):
        stop_pid(self.proc.pid, signal.SIGKILL)
        self.killed = True

    def finish(self, timeout=240) -> dict:
        self._reader.join(timeout)
        if self._reader.is_alive():
            self.kill()
            self._reader.join(10)
        stdout = self.out[0] if self.out else ""
        run = None if self.killed else parse_run(stdout)
        waiting = bool(run and outputs_of(run, "Wait for Approval"))
        return {"killed": self.killed, "exit": self.proc.returncode, "waiting_for_approval": waiting,
                "error": run_error(run) if run else ("killed" if self.killed else "no run data"),
                "seconds": round(time.monotonic() - self.t0, 1), "end": time.monotonic()}


def _queue_stack_class():
    """SoakStack with n8n in queue mode, started the way tests/scaleout/test_n8n_queue.py does."""
    from scaleout.test_n8n_queue import QueueStack, WEBHOOK_PATH, wait_webhook_registered, webhook_workflow

    class QueueSoakStack(SoakStack, QueueStack):
        WORKERS = ("n8n-worker-1", "n8n-worker-2")

        # A SIGKILLed worker's job is not run again by the other worker: n8n 2.40.7 creates its Bull
        # queue with maxStalledCount 0 (scaling.service.js), so the stalled job fails; the soak
        # re-runs the job itself, as for n8n_kill in regular mode.

        def boot_queue(self):
            import psycopg2
            self.import_workflows([webhook_workflow(self)], publish=["wfqueuearticle"])
            ready = {name: self.start_worker(name) for name in self.WORKERS}
            self.start_main()
            for name, url in ready.items():
                wait_http(url, timeout=120, proc=self.n8n_procs[name].proc, log=self.n8n_procs[name].log_path)
            wait_http(self.main_url + "/healthz/readiness", timeout=120, proc=self.n8n_procs["main"].proc,
                      log=self.n8n_procs["main"].log_path)
            wait_webhook_registered(self)
            self.webhook_url = f"{self.main_url}/webhook/{WEBHOOK_PATH}"
            self.pg = psycopg2.connect(host="127.0.0.1", user="postgres", dbname=self.pg_database)
            self.pg.autocommit = True
            self.claimed: set[int] = set()
            self.worker_restarts = 0

        def sql(self, query: str, *params):
            with self.pg.cursor() as cur:
                cur.execute(query, params)
                return cur.fetchall()

        def max_execution_id(self) -> int:
            return self.sql("SELECT coalesce(max(id), 0) FROM execution_entity")[0][0]

        def claim_execution(self, after: int) -> int | None:
            """The oldest execution created after ``after`` that no Run has claimed yet."""
            for (eid,) in self.sql("SELECT id FROM execution_entity WHERE id > %s ORDER BY id", after):
                if eid not in self.claimed:
                    self.claimed.add(eid)
                    return eid
            return None

        def worker_of(self, execution_id: int) -> str | None:
            for name in self.WORKERS:
                if re.search(rf"Worker started execution {execution_id}\b", self.log_of(name)):
                    return name
            return None

        def restart_worker(self, name: str):
            """SIGKILL a worker (its process group: n8n worker and its task runner) and start it again;
            not waited for: the other worker takes the next run meanwhile."""
            old = self.n8n_procs[name]
            old.stop(signal.SIGKILL)
            self.services.remove(old)
            self.start_worker(name)
            self.worker_restarts += 1

        def stop(self):
            if getattr(self, "pg", None) is not None:
                self.pg.close()
            super().stop()

    return QueueSoakStack


def unflatten(text: str):
    """n8n stores execution data with `flatted` (a JSON array; strings inside objects and arrays
    are indexes into it): back to the plain object."""
    arr = json.loads(text)
    seen: dict[int, object] = {}

    def rev(i: int):
        if i in seen:
            return seen[i]
        v = arr[i]
        if isinstance(v, list):
            out: list = []
            seen[i] = out
            out.extend(rev(int(x)) if isinstance(x, str) else x for x in v)
            return out
        if isinstance(v, dict):
            out_d: dict = {}
            seen[i] = out_d
            for k, x in v.items():
                out_d[k] = rev(int(x)) if isinstance(x, str) else x
            return out_d
        return v

    return rev(0)


class QueueRun:
    """One run in queue mode: the production webhook POSTed to the main, which enqueues it; a
    worker runs it. Followed in n8n's PostgreSQL database (execution_entity / execution_data)."""

    def __init__(self, stack, job_id: str):
        self.stack, self.t0 = stack, time.monotonic()
        self.base = stack.max_execution_id()
        r = requests.post(stack.webhook_url, json={"job_id": job_id}, timeout=60)
        r.raise_for_status()
        self.eid: int | None = None
        self.killed = False
        self.worker: str | None = None

    def _id(self, timeout: float = 0) -> int | None:
        deadline = time.monotonic() + timeout
        while self.eid is None:
            self.eid = self.stack.claim_execution(self.base)
            if self.eid is not None or time.monotonic() >= deadline:
                break
            time.sleep(0.05)
        return self.eid

    def _row(self):
        eid = self._id()
        if eid is None:
            return None
        rows = self.stack.sql('SELECT status, "stoppedAt" IS NOT NULL FROM execution_entity WHERE id = %s', eid)
        return rows[0] if rows else None

    def running(self) -> bool:
        time.sleep(0.04)  # a database query per poll: no need to spin
        row = self._row()
        return row is None or not row[1]

    def kill(self):
        """SIGKILL the worker running this execution (then start it again)."""
        eid = self._id(timeout=30)
        deadline = time.monotonic() + 30
        while eid is not None and self.worker is None and time.monotonic() < deadline:
            self.worker = self.stack.worker_of(eid)
            if self.worker is None:
                time.sleep(0.05)
        if self.worker is not None:
            self.stack.restart_worker(self.worker)
            self.killed = True

    def finish(self, timeout=240) -> dict:
        deadline = time.monotonic() + timeout
        status, run = None, None
        if not self.killed:
            while self.running() and time.monotonic() < deadline:
                time.sleep(0.2)
            row = self._row()
            status = row[0] if row else None
            if row and row[1]:
                data = self.stack.sql('SELECT data FROM execution_data WHERE "executionId" = %s', self.eid)
                run = {"data": unflatten(data[0][0])} if data else None
        waiting = bool(status in ("success", "waiting") and run and outputs_of(run, "Wait for Approval"))
        error = run_error(run) if run else ("killed" if self.killed else f"no run data (status {status})")
        return {"killed": self.killed, "exit": status, "waiting_for_approval": waiting, "error": error,
                "seconds": round(time.monotonic() - self.t0, 1), "end": time.monotonic(),
                "execution_id": self.eid, "worker": self.worker or (self.stack.worker_of(self.eid) if self.eid else None)}


class Soak:
    def __init__(self, args):
        self.args = args
        self.rng = random.Random(args.seed)
        self.requests_per_run = 40  # first guess; replaced by what clean runs measure
        self.deadline = time.monotonic() + args.max_seconds
        self.jobs: list[dict] = []
        self._wf_job: dict[str, str] = {}

    # ------------------------------------------------------------------ one job

    def wait_requests(self, run: Run, k: int) -> bool:
        """Until the ledger relay forwarded k more requests for this run; False if it ended first."""
        base = self.stack.ledger_relay.forwarded
        while self.stack.ledger_relay.forwarded - base < k:
            if not run.running():
                return False
            time.sleep(0.01)
        return True

    def interrupted_run(self, kind: str, wf: str) -> dict:
        k = self.rng.randint(1, self.requests_per_run)
        rec = {"kind": kind, "k": k, "interrupted": False}
        if kind == "competing":
            # Both runs start at once; the later Start Job takes the lease over and fences the other.
            runs = [self.new_run(wf), self.new_run(wf)]
            rec["t_interrupt"] = time.monotonic()
            results = [r.finish() for r in runs]
            rec["interrupted"] = True
            rec["runs"] = [{k2: v for k2, v in r.items() if k2 != "end"} for r in results]
            rec["reached_approval_wait"] = any(r["waiting_for_approval"] for r in results)
            rec["fenced_losers"] = sum(1 for r in results if not r["waiting_for_approval"]
                                       and any(w in (r["error"] or "").lower() for w in ("stale", "fenc", "lease")))
            rec["t_end"] = max(r["end"] for r in results)
            return rec
        if kind == "response_drop":
            # The j-th WordPress write of the run (3 uploads, draft, SEO, resource pack) reaches
            # WordPress; its answer is replaced by a connection reset.
            lossy = self.stack.lossy
            rec["k"] = j = self.rng.randint(1, WRITES_PER_RUN)
            dropped = lossy.dropped
            lossy.skip_posts, lossy.drop_responses = j - 1, 1
            run = self.new_run(wf)
            while run.running() and lossy.dropped == dropped:
                time.sleep(0.01)
            if lossy.dropped > dropped:
                rec["t_interrupt"] = time.monotonic()
                rec["interrupted"] = True
            result = run.finish()
            lossy.skip_posts = lossy.drop_responses = 0
            rec.update(result=_brief(result), reached_approval_wait=result["waiting_for_approval"], t_end=result["end"])
            return rec
        run = self.new_run(wf)
        if kind in ("n8n_kill", "ledger_kill") and self.wait_requests(run, k):
            rec["t_interrupt"] = time.monotonic()
            rec["interrupted"] = True
            if kind == "n8n_kill":
                run.kill()
            else:
                rec["ledger_restart_s"] = self.stack.restart_ledger(signal.SIGKILL)
        result = run.finish()
        if kind == "n8n_kill" and rec["interrupted"] and not run.killed:
            rec["interrupted"] = False  # queue mode: the execution ended before its worker was found
        if kind == "none" and result["waiting_for_approval"]:
            self.requests_per_run = max(10, self.stack.ledger_relay.forwarded - self._forwarded_at_start)
        rec.update(result=_brief(result), reached_approval_wait=result["waiting_for_approval"], t_end=result["end"])
        return rec

    def dispatch_counts(self, job_id: str) -> dict:
        """Per operation: how many times it went to SENT (each one is a dispatch)."""
        out = {}
        for op in self.stack.operations(job_id):
            events = self.stack.ledger("GET", f"/v1/operations/{quote(op['operation_key'], safe='')}")["events"]
            out[op["operation_key"]] = {"action": op["action"], "state": op["state"],
                                        "sent": sum(1 for e in events if e["to_state"] == "SENT")}
        return out

    def new_run(self, wf: str):
        if self.args.n8n == "queue":
            return QueueRun(self.stack, self._wf_job[wf])
        return Run(self.stack, wf)

    def run_job(self, i: int, kind: str, wf: str, job_id: str) -> dict:
        t_job = time.monotonic()
        hostile = self.hostile if (kind == "hostile" or self.args.hostile == "all") else None
        if hostile is not None:
            hostile.fence_out(job_id)  # a real lease of the same tenant, taken over by the run's Start Job
            hostile.target(job_id)
        self._forwarded_at_start = self.stack.ledger_relay.forwarded
        try:
            return self._run_job(kind, wf, job_id, t_job)
        finally:
            self.hostile.target(None)

    def _run_job(self, kind: str, wf: str, job_id: str, t_job: float) -> dict:
        first = self.interrupted_run(kind, wf)
        rec = {"job_id": job_id, "kind": kind, **{k: v for k, v in first.items() if not k.startswith("t_")}}
        if kind == "hostile":
            rec["interrupted"] = False  # nothing interrupted the run: it must reach the wait at once
        try:
            phase_at_interrupt = self.stack.ledger("GET", f"/v1/jobs/{quote(job_id, safe='')}")["phase"]
        except requests.HTTPError:  # killed before Start Job created the job
            phase_at_interrupt = None
        before = self.dispatch_counts(job_id) if phase_at_interrupt and first["interrupted"] else {}
        reruns = 0
        # A run that reached the approval wait despite a dropped response has already recovered
        # (the proxy or the ledger reconciled in-line); anything else runs again.
        reached = first.get("reached_approval_wait", False)
        t_end = first["t_end"]
        errors = []
        while not reached and reruns < self.args.max_runs - 1 and time.monotonic() < self.deadline:
            reruns += 1
            res = self.new_run(wf).finish()
            t_end = res["end"]
            reached = res["waiting_for_approval"]
            if not reached:
                errors.append(res["error"])
        rec.update(reruns=reruns, reached_approval_wait=reached, rerun_errors=errors[:3],
                   phase_at_interrupt=phase_at_interrupt, job_seconds=round(time.monotonic() - t_job, 1))
        if first["interrupted"] and reached:
            rec["recover_s"] = round(t_end - first["t_interrupt"], 2)
        if first["interrupted"] and kind != "competing":
            after = self.dispatch_counts(job_id)
            redone = [v["action"] for key, v in after.items() if key in before and v["sent"] > before[key]["sent"]]
            rec["ops_redispatched"] = redone
            rec["phases_redone"] = len({PHASE_OF_ACTION[a.split(":", 1)[0]] for a in redone})
        return rec

    # ------------------------------------------------------------------ the soak

    def plan(self, n: int) -> list[str]:
        controls = max(1, n // 10)
        kinds = [KINDS[i % len(KINDS)] for i in range(n - controls)] + ["none"] * controls
        first, rest = kinds[-1:], kinds[:-1]  # one clean run first: it measures requests_per_run
        self.rng.shuffle(rest)
        return first + rest

    def run(self) -> dict:
        args = self.args
        t0 = time.monotonic()
        workdir = Path(tempfile.mkdtemp(prefix="durable-soak-"))
        tag = f"{args.seed}_{os.getpid()}_{int(time.time()) % 100000}"
        dbs: list[str] = []
        kw: dict = {}
        if args.backend == "postgres" or args.n8n == "queue":
            subprocess.run(["bash", str(REPO / "stack" / "ensure-services.sh"), "postgres",
                            *(["redis"] if args.n8n == "queue" else [])], check=True)
        if args.backend == "postgres":
            dbs.append(f"soak_ledger_{tag}")
            kw["ledger_db_url"] = f"postgresql://postgres@127.0.0.1:5432/{dbs[-1]}"
        if args.n8n == "queue":
            dbs.append(f"soak_n8n_{tag}")
            kw.update(pg_database=dbs[-1], bull_prefix=f"bull-soak-{tag}")
        for name in dbs:
            psql(f"CREATE DATABASE {name}")
        cls = _queue_stack_class() if args.n8n == "queue" else SoakStack
        self.stack = cls(workdir, say=log, **kw)
        self.hostile = None
        try:
            self.stack.start(ledger_relay=True)
            prefix = f"soak{args.seed}"
            jobs = [(f"{prefix}-{i:03d}", f"wfsoak{args.seed % 1000}x{i:03d}") for i in range(args.jobs)]
            self._wf_job = {wf: job for job, wf in jobs}
            if args.n8n == "queue":
                self.stack.boot_queue()  # one webhook workflow; job_id comes with each request
            else:
                self.stack.import_workflows([self.stack.workflow(wf, job, topic=f"Soak article {i}")
                                             for i, (job, wf) in enumerate(jobs)])
            self.hostile = HostileRunners(self.stack.proxy_url, self.stack.ledger_url, SITE, TENANT,
                                          self.stack.tokens["runner"], INTRUDER, self.stack.tokens[INTRUDER],
                                          seed=args.seed).start()
            setup_s = round(time.monotonic() - t0, 1)
            log(f"stack ready in {setup_s} s; {args.jobs} jobs, seed {args.seed}, ledger on {args.backend}, "
                f"n8n {args.n8n}, hostile runners on {args.hostile} jobs")
            skipped = 0
            for i, ((job_id, wf), kind) in enumerate(zip(jobs, self.plan(args.jobs))):
                # Keep room for the sweep and the counting at the end.
                if time.monotonic() > self.deadline - 60:
                    skipped = args.jobs - i
                    log(f"time bound reached: {skipped} jobs not started")
                    break
                rec = self.run_job(i, kind, wf, job_id)
                self.jobs.append(rec)
                log(f"{job_id} {kind:13s} k={rec.get('k')} interrupted={rec['interrupted']} "
                    f"reruns={rec['reruns']} waiting={rec['reached_approval_wait']} "
                    f"recover={rec.get('recover_s')} redone={rec.get('ops_redispatched')}")
            hostile = self.hostile.stop()
            sweep = self.sweep()
            report = self.count(sweep, hostile)
            report.update(seed=args.seed, jobs_planned=args.jobs, jobs_not_started=skipped,
                          setup_seconds=setup_s, total_seconds=round(time.monotonic() - t0, 1),
                          requests_per_run=self.requests_per_run,
                          config={"backend": args.backend, "n8n": args.n8n, "hostile": args.hostile,
                                  "databases": dbs,
                                  "n8n_worker_restarts": getattr(self.stack, "worker_restarts", None)})
            return report
        finally:
            if self.hostile is not None:
                self.hostile.stop()
            self.stack.stop()
            for name in dbs:
                try:
                    psql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
                except RuntimeError as exc:
                    log(f"could not drop {name}: {exc}")
            if args.n8n == "queue":
                keys = subprocess.run(["redis-cli", "-h", "127.0.0.1", "--scan", "--pattern", f"bull-soak-{tag}*"],
                                      capture_output=True, text=True).stdout.split()
                if keys:
                    subprocess.run(["redis-cli", "-h", "127.0.0.1", "del", *keys], capture_output=True)
            if not args.keep:
                shutil.rmtree(workdir, ignore_errors=True)

    def sweep(self) -> dict:
        """`durable-ledger sweep` with no age threshold: every run has ended, nothing is in flight."""
        out = subprocess.run([str(LEDGER_BIN), "sweep", "--sent-older-than", "0s", "--job-idle", "0s"],
                             env=self.stack.ledger_env, capture_output=True, text=True, timeout=300)
        if out.returncode != 0:
            raise RuntimeError(f"sweep failed:\n{out.stderr[-2000:]}")
        return json.loads(out.stdout.strip().splitlines()[-1])

    # ------------------------------------------------------------------ counting

    def count(self, sweep: dict, hostile: dict) -> dict:
        st = self.stack
        dup_drafts = dup_media = unauthorized = wrong_advances = unknown_left = 0
        fence_raised = forged_in_wp = 0
        totals = {"completed": 0, "confirmed_failed": 0, "pending_human": 0, "unknown": 0, "abandoned": 0}
        outcome = {"reached_approval_wait": 0, "not_recovered": 0}
        problems = []
        for rec in self.jobs:
            job_id = rec["job_id"]
            wp_job = st.wordpress_job(job_id)
            objects = wp_job["objects"]
            report = st.report(job_id)
            # A forged token that reached WordPress would have raised the job's fence above the
            # ledger's (and locked the real runs out); a forged write that slipped through under the
            # intruder's tenant would sit in WordPress as `intruder:{job_id}`.
            ledger_token = st.ledger("GET", f"/v1/jobs/{quote(job_id, safe='')}")["fencing_token"]
            if int(wp_job.get("fencing_token") or 0) > int(ledger_token or 0):
                fence_raised += 1
                problems.append({"job_id": job_id, "wordpress_fence": wp_job.get("fencing_token"),
                                 "ledger_fence": ledger_token})
            intruded = self._wp_objects(remote_job_id(INTRUDER, job_id))
            if intruded:
                forged_in_wp += len(intruded)
                problems.append({"job_id": job_id, "intruder_objects": intruded[:3]})
            ops = [o for group in report["operations"].values() for o in group]
            confirmed = {o["operation_key"]: o for o in report["operations"]["completed"]}
            posts = [o for o in objects if o["object_type"] == "post"]
            media = [o for o in objects if o["object_type"] == "attachment"]
            d = max(0, len(posts) - 1)
            # One attachment per slot key (hero, inline-1, inline-2), three in all.
            m = max(0, len(media) - len({o.get("operation_key") for o in media}), len(media) - 3)
            dup_drafts += d
            dup_media += m
            # Every WordPress object must be the receipt of a CONFIRMED ledger operation.
            for obj in objects:
                op = confirmed.get(obj.get("operation_key"))
                if op is None or str(op.get("remote_id")) != str(obj["id"]):
                    unauthorized += 1
                    problems.append({"job_id": job_id, "unmatched_object": obj})
            approved = bool(report.get("approvals"))
            for p in posts:
                if p["status"] == "publish" and not (approved and any(o["action"] == "publish" for o in confirmed.values())):
                    unauthorized += 1
                    problems.append({"job_id": job_id, "published_without_approval": p["id"]})
            # Checkpoints: no skipped phase, and every phase reached is backed by confirmed operations.
            top = -1
            for cp in report["phase_history"]:
                idx = PHASES.index(cp["phase"])
                if idx > top + 1:
                    wrong_advances += 1
                    problems.append({"job_id": job_id, "skipped_to": cp["phase"]})
                top = max(top, idx)
            confirmed_actions = {o["action"] for o in confirmed.values()}
            for phase, needed in PHASE_REQUIRES.items():
                if top >= PHASES.index(phase) and not set(needed) <= confirmed_actions:
                    wrong_advances += 1
                    problems.append({"job_id": job_id, "phase_without_receipts": phase})
            if top >= PHASES.index("DRAFT_CONFIRMED"):
                draft = next((o for o in confirmed.values() if o["action"] == "create_draft"), None)
                if draft is None or [str(p["id"]) for p in posts] != [str(draft["remote_id"])]:
                    wrong_advances += 1
                    problems.append({"job_id": job_id, "draft_mismatch": [p["id"] for p in posts]})
            unknown_left += report["counts"]["unknown"]
            for k in totals:
                totals[k] += report["counts"].get(k, 0)
            done = rec["reached_approval_wait"] and len(posts) == 1 and len(media) == 3
            outcome["reached_approval_wait" if done else "not_recovered"] += 1
            rec["wordpress"] = {"posts": len(posts), "media": len(media),
                                "published": sum(1 for p in posts if p["status"] == "publish")}
            rec["ledger"] = {"phase": report["phase"], "counts": report["counts"], "ops": len(ops)}
        if hostile.get("intruder_own_grant"):
            probe = self._wp_objects(remote_job_id(INTRUDER, hostile["intruder_own_grant"].split(":")[1]))
            if probe:
                forged_in_wp += len(probe)
                problems.append({"intruder_probe_objects": probe[:3]})
        metrics = st.ledger("GET", "/v1/metrics/acceptance")
        per_kind = {}
        for kind in (*KINDS, "none"):
            recs = [r for r in self.jobs if r["kind"] == kind]
            hit = [r for r in recs if r["interrupted"]]
            rec_s = sorted(r["recover_s"] for r in hit if "recover_s" in r)
            lost = [r["phases_redone"] for r in hit if "phases_redone" in r]
            per_kind[kind] = {
                "jobs": len(recs), "interrupted": len(hit),
                "reruns": sum(r["reruns"] for r in recs),
                "recover_p50_s": round(statistics.median(rec_s), 2) if rec_s else None,
                "recover_max_s": max(rec_s) if rec_s else None,
                "phases_redone_total": sum(lost), "phases_redone_max": max(lost) if lost else None,
                "ops_redispatched": sum(len(r.get("ops_redispatched", [])) for r in hit),
            }
            if kind == "competing":
                per_kind[kind]["fenced_losers"] = sum(r.get("fenced_losers", 0) for r in recs)
            if kind == "hostile":
                # Forged writes must not disturb the real run: it reaches the wait at once.
                per_kind[kind]["forged_writes"] = sum(self.hostile.per_job[r["job_id"]] for r in recs)
                per_kind[kind]["first_run_reached_wait"] = sum(1 for r in recs if r.get("reached_approval_wait")
                                                               and not r["reruns"])
        forged_per_job = self.hostile.per_job  # by the job each forged write named
        unrefused = hostile["forged_writes"] - hostile["transport_errors"] - hostile["refused"]
        hostile_section = {**hostile, "unrefused": unrefused,
                           "forged_writes_per_job": dict(sorted(forged_per_job.items()))}
        return {
            "jobs": len(self.jobs),
            "duplicate_drafts": dup_drafts,
            "duplicate_media": dup_media,
            "unauthorized_side_effects": unauthorized,
            "wrong_checkpoint_advances": wrong_advances,
            "unknown_left": unknown_left,
            "forged_accepted": hostile["accepted"],
            "forged_fence_raised": fence_raised,
            "forged_objects_in_wordpress": forged_in_wp,
            "jobs_outcome": outcome,
            "operations": totals,
            "per_interruption": per_kind,
            "sweep": {k: sweep.get(k) for k in ("examined", "confirmed", "retry_allowed", "needs_review", "errors")},
            "ledger_acceptance": {k: metrics[k] for k in ("operations_confirmed_twice", "duplicate_remote_ids",
                                                          "unauthorized_side_effects_refused",
                                                          "checkpoint_advances_refused", "unknown_operations_left",
                                                          "refusals_by_code")},
            "wordpress_response_drops": st.lossy.dropped,
            "hostile": hostile_section,
            "problems": problems[:20],
            "per_job": [{k: r.get(k) for k in ("job_id", "kind", "k", "interrupted", "reruns", "reached_approval_wait",
                                               "recover_s", "phase_at_interrupt", "ops_redispatched", "wordpress")}
                        for r in self.jobs] if self.args.per_job else None,
        }

    def _wp_objects(self, remote_job: str) -> list:
        return self.stack.wp_get(f"/durable/v1/jobs/{quote(remote_job, safe='')}").get("objects") or []


def _brief(result: dict) -> dict:
    return {k: result[k] for k in ("killed", "exit", "waiting_for_approval", "error", "seconds")}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=int(os.environ.get("SOAK_JOBS", 50)))
    ap.add_argument("--max-seconds", type=float, default=float(os.environ.get("SOAK_MAX_SECONDS", 1800)))
    ap.add_argument("--max-runs", type=int, default=int(os.environ.get("SOAK_MAX_RUNS", 5)),
                    help="runs per job at most (the interrupted one included)")
    ap.add_argument("--seed", type=int, default=int(os.environ.get("SOAK_SEED", int(time.time()) % 100000)))
    ap.add_argument("--per-job", action="store_true", default=os.environ.get("SOAK_PER_JOB") == "1")
    ap.add_argument("--out", default=os.environ.get("SOAK_OUT"), help="also write the JSON report here")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (logs, ledger database)")
    ap.add_argument("--backend", choices=("sqlite", "postgres"), default=os.environ.get("SOAK_BACKEND", "sqlite"),
                    help="the ledger's database")
    ap.add_argument("--n8n", choices=("regular", "queue"), default=os.environ.get("SOAK_N8N", "regular"),
                    help="n8n regular (n8n execute per run) or queue mode (main + 2 workers on Redis)")
    ap.add_argument("--hostile", choices=("kind", "all"), default=os.environ.get("SOAK_HOSTILE", "kind"),
                    help="hostile runners on the `hostile` jobs only, or on every job")
    args = ap.parse_args(argv)
    report = Soak(args).run()
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    bad = [k for k in ("duplicate_drafts", "duplicate_media", "unauthorized_side_effects",
                       "wrong_checkpoint_advances", "unknown_left", "forged_accepted", "forged_fence_raised",
                       "forged_objects_in_wordpress") if report[k]]
    if report["jobs_outcome"]["not_recovered"]:
        bad.append("not_recovered")
    if report["hostile"]["unrefused"]:  # every forged write that got an answer was refused
        bad.append("hostile.unrefused")
    if bad:
        log(f"FAILED: {', '.join(bad)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
