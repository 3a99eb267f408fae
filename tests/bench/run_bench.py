"""`make bench`: the gate's cost side by side with the raw SQL floor and DBOS, in one run.

For each backend (SQLite, PostgreSQL) on this machine:
- gate = `begin` + `confirm` through the real HTTP API (keep-alive, authenticated, validated,
  fenced, event-logged), driven by wrk + Lua (a Python client alone costs ~1 ms a request):
  p50/p99 of the pair at 1 connection (begin sent -> confirm answered, timed in Lua) and at
  16 connections (2 x request percentile), gated ops/s at 1 and 16 (steady-state window, see
  common.lua); the batch endpoint with 10 and 100 items per request (each request confirms
  the previous answer's operations and begins as many new ones); every answer is checked and
  anything unexpected counted in `errors`; after each run the bench waits until the server
  is idle again; wrk's own CPU share and the machine's busy share are reported;
- in-process gate = the same begin + confirm through `durable_ledger.client.LocalLedger`
  (no HTTP), single thread, on the database the HTTP server uses;
- floor = the same two statements (INSERT the SENT row, UPDATE it to CONFIRMED) through the
  driver directly, autocommit;
- DBOS Transact's per-step cost (`@DBOS.step()` in a workflow) on the same kind of database;
- latency again with 10k and 1M operations already stored (fresh databases, preloaded with
  operations and their events, measured in interleaved passes);
- with `--baseline REF`: the HTTP gate of REF's ledger (a git worktree, its own server and
  database) measured in passes interleaved with the current tree's (A B B A ...), so machine
  noise hits both; `current/baseline` ratios.
Every figure that is measured in passes is the median of its passes. Prints one JSON document
on stdout (progress on stderr). Numbers are only comparable within one run: report ratios.
"""

import argparse
import atexit
import contextlib
import json
import os
import platform
import re
import resource
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import psycopg2
import requests

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
import slow_clients  # noqa: E402
from servers import LedgerServer  # noqa: E402

PG_ADMIN = os.environ.get("DURABLE_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
TOKEN = "bench-token"
# batch1 is the chained sequential step: each request confirms the step the previous answer
# dispatched and begins the next one (POST /v1/operations/batch with one of each), one item per
# request, one request per gated step instead of two.
BATCH_SIZES = (1, 10, 100)


def log(msg):
    print(f"[bench] {time.strftime('%H:%M:%S')} {msg}", file=sys.stderr, flush=True)


def med(values):
    values = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if not values:
        return None
    m = statistics.median(values)
    return round(m, 3) if isinstance(m, float) else m


def ratio(a, b, nd=2):
    ok = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (a, b))
    return round(a / b, nd) if ok and b else None


def median_of(passes):
    """Per-leaf median over a list of same-shaped dicts; counters named errors* are summed."""
    out = {}
    for key in passes[0]:
        vals = [p.get(key) for p in passes]
        if isinstance(vals[0], dict):
            out[key] = median_of([v for v in vals if isinstance(v, dict)])
        elif key.startswith("errors") or key == "anomalies":
            out[key] = sum(v or 0 for v in vals)
        else:
            out[key] = med(vals)
    return out


def cpu_times():
    """(busy, total) jiffies over all cores, from /proc/stat."""
    with open("/proc/stat") as f:
        parts = [int(x) for x in f.readline().split()[1:]]
    idle = parts[3] + (parts[4] if len(parts) > 4 else 0)
    return sum(parts) - idle, sum(parts)


def group_cpu_ticks(pgid):
    """CPU ticks (user + system) of every live process in a process group (the ledger server:
    `serve`'s parent, its workers and helpers); read as the slow-client probes read it."""
    return slow_clients.group_cpu_s(pgid) * os.sysconf("SC_CLK_TCK")


def wait_idle(pgid, timeout=60.0):
    """Wait until the server has finished what a stopped wrk left in flight (a 16 x 100-item
    round goes on for seconds after wrk exits), so it does not bleed into the next run."""
    if not pgid:
        return 0.0
    hz = os.sysconf("SC_CLK_TCK")
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout:
        a = group_cpu_ticks(pgid)
        time.sleep(0.25)
        if (group_cpu_ticks(pgid) - a) / hz < 0.25 * 0.1:  # under 10% of one core
            break
    return round(time.perf_counter() - t0, 2)


# --------------------------------------------------------------------------------------- wrk

def wrk(url, conns, threads, seconds, fence, job, script="gate.lua", batch=1, pgid=None, close=False):
    """One wrk run; every answer is checked by the Lua script (see gate.lua). With ``pgid``
    (the server's process group) it returns only once the server is idle again. ``close``:
    `Connection: close` on every request (a new connection each, as the n8n node calls)."""
    env = {**os.environ, "TOKEN": TOKEN, "JOB": job, "FENCE": str(fence), "PREFIX": uuid.uuid4().hex[:8],
           "BATCH": str(batch), "CONNS": str(conns), "THREADS": str(threads), "BENCH_LUA_DIR": str(HERE),
           "CLOSE": "1" if close else "0"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    busy0, total0 = cpu_times()
    t0 = time.perf_counter()
    # --timeout 30s: a slow answer is measured, not dropped as a socket error with no latency
    proc = subprocess.run(["wrk", f"-t{threads}", f"-c{conns}", f"-d{seconds}s", "--timeout", "30s", "--latency", "-s",
                           str(HERE / script), url], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    busy1, total1 = cpu_times()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    drained = wait_idle(pgid)
    m = re.search(r"WRKJSON (\{.*\})", proc.stdout)
    if proc.returncode != 0 or not m:
        raise RuntimeError(f"wrk failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
    data = json.loads(m.group(1))
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    secs = data["duration_us"] / 1e6
    data["rps"] = data["requests"] / secs
    # A gated step is one dispatched begin + one CONFIRMED confirm: work = (begins + confirms) / 2,
    # counted in the steady-state window of each wrk thread (see common.lua); work / duration
    # is kept for comparison (it undercounts by about one request latency).
    # A thread with no answer after its first round has no window: the run was too short.
    data["ops_per_s"] = data["ops_per_s_window"] if data["windowed_threads"] == data["threads"] else None
    data["ops_per_s_over_duration"] = (data["dispatched"] + data["confirmed"]) / 2 / secs
    data["errors"] = data["errors_status"] + data["errors_socket"] + data["anomalies"]
    data["wrk_cpu_share_of_one_core"] = round(cpu / wall, 3)
    data["machine_cpu_busy_share"] = round((busy1 - busy0) / max(1, total1 - total0), 3)
    data["drain_s"] = drained
    return data


def r1(x):
    return round(x, 1) if x is not None else None


def pair_ms(run, p):
    """begin sent -> its confirm answered, measured in Lua at one connection per wrk thread."""
    return round(run[f"pair_p{p}_us"] / 1000, 3) if run["pairs"] else None


def gate_pass(url, job, fence, seconds, pgid):
    """One pass of every HTTP gate measurement against one server."""
    lat = wrk(url, 1, 1, seconds, fence, job, pgid=pgid)
    thr = wrk(url, 16, 2, seconds, fence, job, pgid=pgid)
    out = {
        "p50_ms": pair_ms(lat, 50),
        "p99_ms": pair_ms(lat, 99),
        "pairs": lat["pairs"],
        "request_p50_ms": round(lat["p50_us"] / 1000, 3),
        "request_p99_ms": round(lat["p99_us"] / 1000, 3),
        "ops_per_s_1": r1(lat["ops_per_s"]),
        "p50_ms_16": round(2 * thr["p50_us"] / 1000, 3),
        "p99_ms_16": round(2 * thr["p99_us"] / 1000, 3),
        "ops_per_s_16": r1(thr["ops_per_s"]),
        "ops_per_s_1_over_duration": round(lat["ops_per_s_over_duration"], 1),
        "ops_per_s_16_over_duration": round(thr["ops_per_s_over_duration"], 1),
        "wrk_cpu_share": {"c1": lat["wrk_cpu_share_of_one_core"], "c16": thr["wrk_cpu_share_of_one_core"]},
        "machine_cpu_busy_share_1": lat["machine_cpu_busy_share"],
        "machine_cpu_busy_share_16": thr["machine_cpu_busy_share"],
        "errors": lat["errors"] + thr["errors"],
    }
    for n in BATCH_SIZES:
        b = wrk(url, 16, 2, seconds, fence, job, script="gate_batch.lua", batch=n, pgid=pgid)
        done = b["requests"] > 0
        out[f"batch{n}"] = {"ops_per_s_16": r1(b["ops_per_s"]),
                            "ops_per_s_16_over_duration": round(b["ops_per_s_over_duration"], 1),
                            "request_p50_ms": round(b["p50_us"] / 1000, 3) if done else None,
                            "request_p99_ms": round(b["p99_us"] / 1000, 3) if done else None,
                            "requests": b["requests"]}
        out["wrk_cpu_share"][f"batch{n}_c16"] = b["wrk_cpu_share_of_one_core"]
        out[f"batch{n}"]["drain_s"] = b["drain_s"]
        out["errors"] += b["errors"]
    return out


def warm_up(url, job, fence, seconds, pgid):
    """Connections, caches, every server process and thread: not measured, errors counted."""
    s = max(1, min(2, seconds))
    return sum(wrk(url, 16, 2, s, fence, job, script=sc, batch=b, pgid=pgid)["errors"]
               for sc, b in (("gate.lua", 1), ("gate_batch.lua", 100)))


# ------------------------------------------------------------------------- floor, peers

def _floor(conn, param, job_pk, n):
    """p50 of INSERT (SENT) + UPDATE (CONFIRMED), autocommit: what a hand-rolled ledger costs."""
    cur = conn.cursor()
    insert = ("INSERT INTO operation (tenant, operation_key, job_id, task_version, action, request_hash, state,"
              " attempt, max_attempts, fencing_token, requires_approval, reconcile_attempts, created_at,"
              " updated_at) VALUES (?,?,?,1,?,?,'SENT',1,3,1,false,0,?,?)").replace("?", param)
    update = ("UPDATE operation SET state = 'CONFIRMED', remote_id = ?, updated_at = ?"
              " WHERE tenant = ? AND operation_key = ?").replace("?", param)
    lat = []
    for i in range(n):
        key = f"floor:{uuid.uuid4().hex}"
        now = time.time()
        t0 = time.perf_counter()
        cur.execute(insert, ("bench", key, job_pk, "floor", "0" * 64, now, now))
        cur.execute(update, (str(i), now, "bench", key))
        lat.append((time.perf_counter() - t0) * 1000)
    conn.close()
    return round(statistics.median(lat), 3)


def floor_p50(backend, url, n=2000):
    if backend == "postgres":
        conn = psycopg2.connect(url)
        conn.autocommit = True
        cur = conn.cursor()
        cur.execute("SELECT id FROM job WHERE job_id = 'bench'")
        return _floor(conn, "%s", cur.fetchone()[0], n)
    conn = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
    conn.execute("PRAGMA journal_mode=wal")
    conn.execute("PRAGMA synchronous=normal")
    return _floor(conn, "?", conn.execute("SELECT id FROM job WHERE job_id = 'bench'").fetchone()[0], n)


def _last_line(text):
    lines = [x for x in (text or "").strip().splitlines() if x.strip()]
    return lines[-1] if lines else ""


def dbos_step_ms(python, url):
    out = subprocess.run([python, str(HERE / "dbos_peer.py"), url, "300"], capture_output=True, text=True,
                         timeout=600)
    if out.returncode != 0:
        return {"error": _last_line(out.stderr) or "failed"}
    return json.loads(_last_line(out.stdout))["step_ms"]


def in_process(url, seconds):
    """The in-process client in a process of its own (its own pools, the working tree's code)."""
    out = subprocess.run([sys.executable, str(HERE / "inprocess_peer.py"), url, str(seconds)],
                         capture_output=True, text=True, timeout=seconds * 10 + 120)
    try:
        return json.loads(_last_line(out.stdout))
    except ValueError:
        return {"available": True, "errors": 1, "first_error": _last_line(out.stderr) or f"exit {out.returncode}"}


# ------------------------------------------------------------------------------ databases

def op_count(backend, url):
    if backend == "postgres":
        with contextlib.closing(psycopg2.connect(url)) as conn, conn.cursor() as cur:
            cur.execute("SELECT count(*) FROM operation")
            return cur.fetchone()[0]
    with contextlib.closing(sqlite3.connect(url.removeprefix("sqlite:///"))) as conn:
        return conn.execute("SELECT count(*) FROM operation").fetchone()[0]


def preload(backend, url, target, per_job=100):
    """Top the ledger up to ``target`` operations, CONFIRMED, each with its two events (SENT,
    CONFIRMED), spread over bulk jobs of ``per_job`` operations; then ANALYZE and checkpoint so
    the measurement does not pay for the bulk load's write-back."""
    have = op_count(backend, url)
    n = target - have
    if n <= 0:
        return
    tag = uuid.uuid4().hex[:6]
    jobs = (n + per_job - 1) // per_job
    if backend == "postgres":
        conn = psycopg2.connect(url)
        conn.autocommit = True
        cur = conn.cursor()
        cur.execute("INSERT INTO job (tenant, job_id, task_version, pipeline, status, cost, resume_attempts,"
                    " created_at, updated_at) SELECT 'bench', 'bulk-' || %s || '-' || j, 1, 'generic', 'active',"
                    " 0, 0, 0, 0 FROM generate_series(1, %s) j", (tag, jobs))
        cur.execute("CREATE TEMP TABLE bulk_jobs AS SELECT id, row_number() OVER (ORDER BY id) - 1 AS k FROM job"
                    " WHERE job_id LIKE %s", (f"bulk-{tag}-%",))
        cur.execute("INSERT INTO operation (tenant, operation_key, job_id, task_version, action, request_hash,"
                    " state, attempt, max_attempts, fencing_token, requires_approval, reconcile_attempts,"
                    " remote_id, created_at, updated_at)"
                    " SELECT 'bench', 'bench:bulk:v1:' || %s || ':' || g, b.id, 1, 'bulk-' || g,"
                    " md5(g::text) || md5(g::text), 'CONFIRMED', 1, 3, 1, false, 0, g::text, 0, 0"
                    " FROM generate_series(0, %s - 1) g JOIN bulk_jobs b ON b.k = g / %s",
                    (tag, n, per_job))
        cur.execute("INSERT INTO operation_event (operation_id, job_id, from_state, to_state, actor,"
                    " fencing_token, created_at) SELECT o.id, o.job_id, s.f, s.t, 'bench', 1, 0"
                    " FROM operation o JOIN bulk_jobs b ON b.id = o.job_id"
                    " CROSS JOIN (VALUES (NULL, 'SENT'), ('SENT', 'CONFIRMED')) AS s(f, t)")
        cur.execute("VACUUM ANALYZE")
        cur.execute("CHECKPOINT")
        conn.close()
    else:
        conn = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("WITH RECURSIVE g(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM g WHERE x < ?)"
                     " INSERT INTO job (tenant, job_id, task_version, pipeline, status, cost, resume_attempts,"
                     " created_at, updated_at) SELECT 'bench', 'bulk-' || ? || '-' || x, 1, 'generic', 'active',"
                     " 0, 0, 0, 0 FROM g", (jobs, tag))
        first = conn.execute("SELECT min(id) FROM job WHERE job_id LIKE ?", (f"bulk-{tag}-%",)).fetchone()[0]
        conn.execute("WITH RECURSIVE g(x) AS (SELECT 0 UNION ALL SELECT x + 1 FROM g WHERE x < ? - 1)"
                     " INSERT INTO operation (tenant, operation_key, job_id, task_version, action, request_hash,"
                     " state, attempt, max_attempts, fencing_token, requires_approval, reconcile_attempts,"
                     " remote_id, created_at, updated_at) SELECT 'bench', 'bench:bulk:v1:' || ? || ':' || x,"
                     " ? + x / ?, 1, 'bulk-' || x, hex(randomblob(32)), 'CONFIRMED', 1, 3, 1, 0, 0, x, 0, 0 FROM g",
                     (n, tag, first, per_job))
        conn.execute("INSERT INTO operation_event (operation_id, job_id, from_state, to_state, actor,"
                     " fencing_token, created_at) SELECT o.id, o.job_id, s.f, s.t, 'bench', 1, 0"
                     " FROM operation o CROSS JOIN (SELECT NULL AS f, 'SENT' AS t UNION ALL"
                     " SELECT 'SENT', 'CONFIRMED') s WHERE o.job_id >= ?", (first,))
        conn.execute("COMMIT")
        conn.execute("ANALYZE")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()


class Databases:
    """Fresh databases for one backend (unique PostgreSQL names, or files in a temp dir); all
    dropped / removed at the end."""

    def __init__(self, backend):
        self.backend = backend
        self.work = Path(tempfile.mkdtemp(prefix=f"bench-{backend}-"))
        self.prefix = f"durable_bench_{uuid.uuid4().hex[:8]}"
        self.names = []
        self.admin = None
        if backend == "postgres":
            self.admin = psycopg2.connect(PG_ADMIN)
            self.admin.autocommit = True

    def new(self, name, ext="db"):
        if self.backend == "postgres":
            db = f"{self.prefix}_{name}"
            self.admin.cursor().execute(f'CREATE DATABASE "{db}"')
            self.names.append(db)
            return f"{PG_ADMIN.rsplit('/', 1)[0]}/{db}"
        return f"sqlite:///{self.work}/{name}.{ext}"

    def close(self):
        if self.admin is not None:
            for db in self.names:
                with contextlib.suppress(Exception):
                    self.admin.cursor().execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
            self.admin.close()
        shutil.rmtree(self.work, ignore_errors=True)


def start_server(stack, url, args, log_path, pythonpath=None):
    """A ledger server (`durable-ledger serve`, as in production) with a leased job `bench`; returns (server, fence)."""
    srv = LedgerServer(url, f"bench:runner:{TOKEN}", workers=args.workers, threads=args.threads, log_path=log_path)
    if pythonpath:  # the baseline: its own durable_ledger first, the venv for the dependencies, then
        # the bench's servers (a baseline from before waitress runs on gunicorn)
        srv.env["PYTHONPATH"] = os.pathsep.join(p for p in (pythonpath, os.environ.get("PYTHONPATH"),
                                                            args.servers_path) if p)
    try:
        stack.enter_context(srv)
    except RuntimeError as exc:  # say why (the log goes away with the temp dir)
        tail = [x for x in Path(log_path).read_text(errors="replace").splitlines() if x.strip()][-3:] \
            if Path(log_path).exists() else []
        raise RuntimeError(f"{exc}: {' | '.join(tail)}") from exc
    s = requests.Session()
    h = {"Authorization": f"Bearer {TOKEN}"}
    s.put(f"{srv.url}/v1/jobs/bench", headers=h, json={}).raise_for_status()
    r = s.post(f"{srv.url}/v1/jobs/bench/lease", headers=h, json={"owner": "bench", "ttl_s": 86400})
    r.raise_for_status()
    return srv, r.json()["fencing_token"]


# ------------------------------------------------------------------------------- per backend

COMPARED = ("p50_ms", "p99_ms", "ops_per_s_1", "p50_ms_16", "p99_ms_16", "ops_per_s_16",
            "batch1.ops_per_s_16", "batch10.ops_per_s_16", "batch10.request_p50_ms", "batch100.ops_per_s_16", "batch100.request_p50_ms")


def _get(d, dotted):
    for part in dotted.split("."):
        d = d.get(part) if isinstance(d, dict) else None
    return d


def run_backend(backend, args, baseline):
    timings = {}
    result = {}
    errors = {}
    dbs = Databases(backend)
    try:
        with contextlib.ExitStack() as stack:
            # 1. The HTTP gate: current (and baseline) in interleaved passes.
            t = time.perf_counter()
            url = dbs.new("ledger")
            cur_srv, cur_fence = start_server(stack, url, args, dbs.work / "ledger.log")
            servers = {"current": (cur_srv, cur_fence)}
            if baseline:
                base_stack = stack.enter_context(contextlib.ExitStack())
                try:
                    servers["baseline"] = start_server(base_stack, dbs.new("baseline"), args,
                                                       dbs.work / "baseline.log",
                                                       pythonpath=str(baseline["tree"] / "ledger-service"))
                except Exception as exc:  # measure the current tree anyway, say why there is no comparison
                    log(f"{backend}: baseline server failed: {exc}")
                    result["compare"] = {"error": f"baseline server: {exc}"}
                    errors["baseline_server"] = 1
            errors["warmup"] = 0
            for name, (srv, fence) in servers.items():
                log(f"{backend}: warm up {name}")
                errors["warmup"] += warm_up(srv.url, "bench", fence, args.seconds, srv.proc.pid)
            passes = {name: [] for name in servers}
            order = []
            for p in range(args.passes):
                names = list(servers) if p % 2 == 0 else list(reversed(servers))  # A B, B A, A B, ...
                for name in names:
                    log(f"{backend}: gate pass {p + 1}/{args.passes}: {name}")
                    srv, fence = servers[name]
                    passes[name].append(gate_pass(srv.url, "bench", fence, args.seconds, srv.proc.pid))
                    order.append(name[0].upper())
            if baseline:
                base_stack.close()  # the baseline server is done: it must not share the machine any longer
            gate = median_of(passes["current"])
            gate["passes"] = len(passes["current"])
            result["gate"] = gate
            errors["gate"] = gate["errors"]
            if "baseline" in servers:
                bgate = median_of(passes["baseline"])
                errors["gate_baseline"] = bgate["errors"]
                result["compare"] = {
                    "order": "".join(order),
                    "passes": args.passes,
                    "baseline": {k: _get(bgate, k) for k in COMPARED} | {"errors": bgate["errors"]},
                    "current": {k: _get(gate, k) for k in COMPARED} | {"errors": gate["errors"]},
                    "current/baseline": {k: ratio(_get(gate, k), _get(bgate, k), 3) for k in COMPARED},
                    "baseline_passes": passes["baseline"],
                }
            result["gate_passes"] = passes["current"]
            timings["gate"] = round(time.perf_counter() - t, 1)

            # 2. Floor, in-process gate and DBOS in interleaved passes, on the HTTP server's
            # database (the server stays up, idle).
            t = time.perf_counter()
            dbos_url = dbs.new("dbos", ext="sqlite")
            floors, inprocs, dboses = [], [], []
            for p in range(args.passes):
                log(f"{backend}: floor / in-process / DBOS pass {p + 1}/{args.passes}")
                floors.append(floor_p50(backend, url))
                ip = in_process(url, args.seconds)
                inprocs.append(ip)
                if not ip.get("available", True):
                    log(f"{backend}: in-process client not available: {ip.get('reason')}")
                if args.dbos_python:
                    dboses.append(dbos_step_ms(args.dbos_python, dbos_url))
            result["floor_p50_ms"] = med(floors)
            result["floor_passes"] = floors
            if all(ip.get("available", True) is False for ip in inprocs):
                result["in_process"] = {"available": False, "reason": inprocs[0].get("reason")}
            else:
                ok = [ip for ip in inprocs if ip.get("available")]
                result["in_process"] = {
                    "available": True,
                    "p50_ms": med(ip.get("p50_ms") for ip in ok),
                    "p99_ms": med(ip.get("p99_ms") for ip in ok),
                    "ops_per_s_1": med(ip.get("ops_per_s") for ip in ok),
                    "n": sum(ip.get("n", 0) for ip in ok),
                    "errors": sum(ip.get("errors", 0) + ip.get("reused", 0) for ip in inprocs),
                    "first_error": next((ip["first_error"] for ip in inprocs if ip.get("first_error")), None),
                    "passes": inprocs,
                }
                errors["in_process"] = result["in_process"]["errors"]
            if args.dbos_python:
                result["dbos_step_ms"] = med(dboses)
                result["dbos_passes"] = dboses
                errors["dbos"] = sum(1 for d in dboses if isinstance(d, dict))
            else:
                result["dbos_step_ms"] = None
            timings["floor_in_process_dbos"] = round(time.perf_counter() - t, 1)
            stack.close()

        # 3. Scale points: one fresh database per point, preloaded, passes interleaved.
        try:
            result["scale"], errors["scale"], timings["scale"] = scale_points(backend, args, dbs)
        except Exception as exc:
            log(f"{backend}: scale points failed: {exc}")
            result["scale"], errors["scale"] = {"error": str(exc)}, 1
    finally:
        dbs.close()
    return finish(backend, args, result, errors, timings)


def scale_points(backend, args, dbs):
    with contextlib.ExitStack() as stack:
        t = time.perf_counter()
        points = {}
        for target in args.scale:
            surl = dbs.new(f"s{target}")
            srv, fence = start_server(stack, surl, args, dbs.work / f"scale-{target}.log")
            log(f"{backend}: preload {target} operations")
            t1 = time.perf_counter()
            preload(backend, surl, target)
            points[target] = {"url": surl, "srv": srv, "fence": fence, "passes": [], "errors": 0,
                              "preload_s": round(time.perf_counter() - t1, 1),
                              "operations_before": op_count(backend, surl)}
            points[target]["errors"] += wrk(srv.url, 1, 1, max(1, min(2, args.seconds)), fence, "bench",
                                            pgid=srv.proc.pid)["errors"]
        for p in range(args.passes):
            targets = list(points) if p % 2 == 0 else list(reversed(points))
            for target in targets:
                log(f"{backend}: scale pass {p + 1}/{args.passes}: {target} operations")
                pt = points[target]
                lat = wrk(pt["srv"].url, 1, 1, args.seconds, pt["fence"], "bench", pgid=pt["srv"].proc.pid)
                pt["passes"].append(pair_ms(lat, 50))
                pt["errors"] += lat["errors"]
        scale = {}
        for target, pt in points.items():
            scale[str(target)] = {"p50_ms": med(pt["passes"]), "passes": pt["passes"],
                                  "operations_before": pt["operations_before"],
                                  "operations_after": op_count(backend, pt["url"]),
                                  "preload_s": pt["preload_s"], "errors": pt["errors"]}
        return scale, sum(pt["errors"] for pt in points.values()), round(time.perf_counter() - t, 1)


def finish(backend, args, result, errors, timings):
    gate = result.get("gate", {})
    g, f, d = gate.get("p50_ms"), result.get("floor_p50_ms"), result.get("dbos_step_ms")
    ip = result.get("in_process", {}).get("p50_ms")
    scale = result.get("scale", {})
    first = scale.get(str(args.scale[0]), {}).get("p50_ms") if args.scale else None
    last = scale.get(str(args.scale[-1]), {}).get("p50_ms") if args.scale else None
    result["ratios"] = {
        "gate_to_floor": ratio(g, f),
        "gate_to_dbos_step": ratio(g, d),
        "in_process_to_dbos_step": ratio(ip, d),
        "in_process_to_floor": ratio(ip, f),
        "chained_to_per_call_ops_16": ratio(_get(gate, "batch1.ops_per_s_16"), gate.get("ops_per_s_16")),
        "batch10_to_per_call_ops_16": ratio(_get(gate, "batch10.ops_per_s_16"), gate.get("ops_per_s_16")),
        "batch100_to_per_call_ops_16": ratio(_get(gate, "batch100.ops_per_s_16"), gate.get("ops_per_s_16")),
    }
    if len(args.scale) > 1:
        result["ratios"][f"p50_at_{args.scale[-1]}_to_{args.scale[0]}"] = ratio(last, first)
    result["load_generator"] = {"wrk_cpu_share_of_one_core": gate.get("wrk_cpu_share"),
                                "machine_cpu_busy_share_1": gate.get("machine_cpu_busy_share_1"),
                                "machine_cpu_busy_share_16": gate.get("machine_cpu_busy_share_16"),
                                "cores": os.cpu_count()}
    errors["total"] = sum(v for v in errors.values() if isinstance(v, int))
    result["errors"] = errors
    result["timings_s"] = timings
    return result


def targets(pg, scale_points):
    """The issue's targets, from this run on PostgreSQL. None = not measured in this run."""
    if not pg:
        return {}, {}
    g, f, d = pg["gate"]["p50_ms"], pg["floor_p50_ms"], pg.get("dbos_step_ms")
    ip = pg["in_process"].get("p50_ms")
    o16, b100 = pg["gate"]["ops_per_s_16"], pg["gate"]["batch100"]["ops_per_s_16"]
    chained = pg["gate"].get("batch1", {}).get("ops_per_s_16")
    s10k = pg["scale"].get("10000", {}).get("p50_ms")
    s1m = pg["scale"].get("1000000", {}).get("p50_ms")
    num = (int, float)

    def check(value, limit, op):
        if not isinstance(value, num) or not isinstance(limit, num) or isinstance(value, bool):
            return None, {"value": value, "limit": limit, "ok": None}
        ok = value <= limit if op == "<=" else value >= limit
        return ok, {"value": round(value, 3), op: round(limit, 3), "ok": ok}

    rows = {
        "http_gate_p50_le_0.8x_dbos_step": check(g, 0.8 * d if isinstance(d, num) else None, "<="),
        "http_gate_p50_le_4x_floor": check(g, 4 * f if isinstance(f, num) else None, "<="),
        "in_process_p50_le_0.3x_dbos_step": check(ip, 0.3 * d if isinstance(d, num) else None, "<="),
        "gated_ops_per_s_16_ge_1000": check(o16, 1000, ">="),
        "chained_gated_ops_per_s_16_ge_1000": check(chained, 1000, ">="),
        "batch100_ops_per_s_ge_3x_per_call": check(b100, 3 * o16 if isinstance(o16, num) else None, ">="),
        "p50_at_1M_within_20pct_of_10k": check(s1m, 1.2 * s10k if isinstance(s10k, num) else None, "<="),
    }
    detail = {k: v[1] for k, v in rows.items()}
    if s1m is None:
        detail["p50_at_1M_within_20pct_of_10k"]["note"] = f"scale points of this run: {scale_points}"
    return {k: v[0] for k, v in rows.items()}, detail


# ----------------------------------------------------------------------------------- machine

def machine_info():
    info = {"cpus": os.cpu_count(), "python": platform.python_version(), "kernel": platform.release(),
            "platform": platform.platform(), "sqlite": sqlite3.sqlite_version}
    with contextlib.suppress(OSError):
        cpuinfo = Path("/proc/cpuinfo").read_text()
        m = re.search(r"^model name\s*:\s*(.+)$", cpuinfo, re.M)
        info["cpu_model"] = m.group(1).strip() if m else None
    with contextlib.suppress(OSError):
        m = re.search(r"^MemTotal:\s*(\d+) kB", Path("/proc/meminfo").read_text(), re.M)
        info["ram_gb"] = round(int(m.group(1)) / 1024 / 1024, 1)
    with contextlib.suppress(OSError):
        m = re.search(r'^PRETTY_NAME="?([^"\n]+)', Path("/etc/os-release").read_text(), re.M)
        info["os"] = m.group(1) if m else None
    try:
        with contextlib.closing(psycopg2.connect(PG_ADMIN)) as conn, conn.cursor() as cur:
            cur.execute("SHOW server_version")
            info["postgres_server"] = cur.fetchone()[0]
    except psycopg2.Error as exc:
        info["postgres_server"] = f"unavailable: {exc}".strip()
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out = subprocess.run(["wrk", "--version"], capture_output=True, text=True).stdout
        info["wrk"] = out.splitlines()[0].split(" [")[0] if out else None
    info["loadavg_start"] = list(os.getloadavg())
    return info


def git(*args, cwd=REPO):
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()


def current_code():
    dirty = git("status", "--porcelain", "--", "ledger-service").splitlines()
    return {"commit": git("rev-parse", "HEAD"), "tree": str(REPO),
            "uncommitted_files_in_ledger_service": len(dirty)}


def open_baseline(ref):
    """A detached git worktree of ``ref`` in a temp dir; removed at exit (also on Ctrl-C / SIGTERM)."""
    sha = git("rev-parse", "--verify", f"{ref}^{{commit}}")
    tmp = Path(tempfile.mkdtemp(prefix="bench-baseline-"))
    tree = tmp / "tree"
    git("worktree", "add", "--detach", "--quiet", str(tree), sha)

    def remove():
        with contextlib.suppress(subprocess.CalledProcessError):
            git("worktree", "remove", "--force", str(tree))
        shutil.rmtree(tmp, ignore_errors=True)
        with contextlib.suppress(subprocess.CalledProcessError):
            git("worktree", "prune")

    atexit.register(remove)
    env = {**os.environ, "PYTHONPATH": str(tree / "ledger-service")}
    imported = subprocess.run([sys.executable, "-c", "import durable_ledger; print(durable_ledger.__file__)"],
                              env=env, capture_output=True, text=True, check=True).stdout.strip()
    if not imported.startswith(str(tree)):
        raise RuntimeError(f"the baseline would import {imported}, not its own durable_ledger")
    subject = git("log", "-1", "--format=%s", sha)
    return {"ref": ref, "commit": sha, "subject": subject, "tree": tree, "imports_from": imported}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backends", default="sqlite,postgres")
    ap.add_argument("--seconds", type=int, default=10, help="length of each measured run (wrk, in-process)")
    ap.add_argument("--passes", type=int, default=3, help="passes of every measurement; medians are reported")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--dbos-python", default=None, help="python of a venv with dbos installed")
    ap.add_argument("--scale", default="10000,1000000", help="stored-operation counts to measure latency at")
    ap.add_argument("--scale-max", type=int, default=None,
                    help="largest scale point (replaces the points above it), e.g. 100000 for a quick run")
    ap.add_argument("--baseline", default=None, metavar="REF",
                    help="git ref whose HTTP gate is measured in passes interleaved with the current tree's")
    ap.add_argument("--servers", default="serve,gunicorn,granian,baseline",
                    help="the server table on PostgreSQL (servers_bench.py): candidates, comma-separated; "
                         "'' to skip")
    ap.add_argument("--servers-baseline", default="a92532a", metavar="REF",
                    help="the ref whose own `serve` is the table's `baseline` candidate")
    ap.add_argument("--servers-path", default=os.path.join(os.environ.get("DURABLE_CACHE", os.path.expanduser(
                        "~/.cache/durable-steps")), "bench-servers"),
                    help="where `make bench-deps` installed the bench-only servers (gunicorn, granian)")
    ap.add_argument("--servers-only", action="store_true", help="only the server table")
    ap.add_argument("--n8n-results", default=None, help="JSON written by the n8n end-to-end overhead measurement")
    ap.add_argument("--n8n-server-results", default=None,
                    help="JSON written by tests/bench/n8n_server_bench.py (the same steps in a running n8n server)")
    args = ap.parse_args()
    args.scale = sorted({int(x) for x in args.scale.split(",") if x})
    if args.scale_max:
        args.scale = [x for x in args.scale if x < args.scale_max] + [args.scale_max]
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the finally/atexit clean-ups
    if shutil.which("wrk") is None:
        sys.exit("wrk is not installed: run `make bench-deps`")

    started = time.time()
    report = {"bench": {"started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
                        "argv": sys.argv[1:], "seconds": args.seconds, "passes": args.passes,
                        "workers": args.workers, "threads": args.threads, "scale_points": args.scale,
                        "definitions": {
                            "p50_ms/p99_ms": "begin+confirm pair at 1 connection: begin sent -> confirm "
                                             "answered, timed in wrk's Lua (monotonic clock)",
                            "p50_ms_16/p99_ms_16": "at 16 connections (2 wrk threads): 2 x request "
                                                   "percentile (pairs cannot be told apart there)",
                            "ops_per_s_*": "gated operations per second: (begins answered dispatch + "
                                           "confirms answered CONFIRMED) / 2, counted per wrk thread from "
                                           "the end of its first round to its last answer",
                            "machine_cpu_busy_share_*": "all cores' busy share during the run (/proc/stat), "
                                                        "everything on the machine included",
                            "wrk_cpu_share_of_one_core": "wrk's own CPU seconds / wall seconds",
                            "ops_per_s_*_over_duration": "all the work / wrk's duration (undercounts by one "
                                                         "request latency, which matters for batches: a "
                                                         "round of 16 x 100 items takes seconds)",
                            "batchN": "POST /v1/operations/batch, N begins + N confirms per request, 16 conns",
                            "in_process": "LocalLedger job.step() + step.confirm(), one thread, p50 per pair",
                            "floor_p50_ms": "INSERT SENT + UPDATE CONFIRMED via the driver, autocommit",
                            "dbos_step_ms": "DBOS @DBOS.step() in a workflow, per step",
                            "current/baseline": "> 1 is slower for *_ms, faster for ops_per_s_*",
                            "errors": "non-200 answers, socket errors, begins that did not dispatch a fresh "
                                      "key, confirms/batch slots that did not answer CONFIRMED, in-process "
                                      "exceptions, failed DBOS runs"}},
              "machine": machine_info(), "current": current_code()}
    baseline = None
    if args.baseline:
        baseline = open_baseline(args.baseline)
        report["baseline"] = {k: str(v) for k, v in baseline.items() if k != "tree"}
        log(f"baseline {baseline['commit'][:10]} ({baseline['subject']}) from {baseline['imports_from']}")
    report["backends"] = {}
    if args.servers:
        import servers_bench  # imports this module by name: loaded here, not at the top

        t = time.perf_counter()
        try:
            report["servers"] = servers_bench.compare(args)
        except Exception as exc:
            log(f"servers: failed: {exc}")
            report["servers"] = {"error": f"{type(exc).__name__}: {exc}"}
        report["servers"]["duration_s"] = round(time.perf_counter() - t, 1)
    for backend in ([] if args.servers_only else args.backends.split(",")):
        t = time.perf_counter()
        try:
            report["backends"][backend] = run_backend(backend, args, baseline)
        except Exception as exc:  # e.g. the working tree's ledger does not start: say so, go on
            log(f"{backend}: failed: {exc}")
            report["backends"][backend] = {"error": f"{type(exc).__name__}: {exc}", "errors": {"total": 1},
                                           "timings_s": {}}
        report["backends"][backend]["timings_s"]["total"] = round(time.perf_counter() - t, 1)
    report["targets"], report["targets_detail"] = targets(report["backends"].get("postgres"), args.scale)
    if args.n8n_results and Path(args.n8n_results).exists():
        path = Path(args.n8n_results)
        n8n = json.loads(path.read_text())
        report["n8n"] = {"runs": n8n.get("runs"), "execution_ms_median": n8n.get("execution_ms_median"),
                         "node_ms_median": n8n.get("node_ms_median"),
                         "overhead_ms_per_gated_step": n8n.get("overhead_ms_per_gated_step"),
                         "steps": n8n.get("steps"), "patterns": n8n.get("patterns"), "targets": n8n.get("targets"),
                         "baseline": n8n.get("baseline"),
                         "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(path.stat().st_mtime))}
    elif args.n8n_results:
        report["n8n"] = {"error": f"{args.n8n_results} was not written"}
    if args.n8n_server_results:
        path = Path(args.n8n_server_results)
        report["n8n_server"] = (json.loads(path.read_text()) if path.exists()
                                else {"error": f"{args.n8n_server_results} was not written"})
    report["errors_total"] = sum(b["errors"]["total"] for b in report["backends"].values()) + sum(
        row.get("errors", 0) for row in report.get("servers", {}).get("table", {}).values())
    report["machine"]["loadavg_end"] = list(os.getloadavg())
    report["bench"]["duration_s"] = round(time.time() - started, 1)
    report["summary"] = summary(report)
    order = ("bench", "machine", "current", "baseline", "summary", "targets", "targets_detail", "errors_total",
             "servers", "n8n", "n8n_server")
    print(json.dumps({k: report[k] for k in (*order, *report) if k in report}, indent=2))


def summary(report):
    """The issue's fields per backend in one flat place (the same numbers as in `backends`)."""
    out = {}
    for name, b in report["backends"].items():
        if "error" in b:
            out[name] = {"error": b["error"]}
            continue
        g, ip, sc = b.get("gate", {}), b.get("in_process", {}), b.get("scale", {})
        row = {
            "http_gate_p50_ms_1": g.get("p50_ms"), "http_gate_p99_ms_1": g.get("p99_ms"),
            "http_gate_p50_ms_16": g.get("p50_ms_16"), "http_gate_p99_ms_16": g.get("p99_ms_16"),
            "ops_per_s_1": g.get("ops_per_s_1"), "ops_per_s_16": g.get("ops_per_s_16"),
            "chained_ops_per_s_16": _get(g, "batch1.ops_per_s_16"),
            "chained_request_p50_ms": _get(g, "batch1.request_p50_ms"),
            "batch10_ops_per_s_16": _get(g, "batch10.ops_per_s_16"),
            "batch10_request_p50_ms": _get(g, "batch10.request_p50_ms"),
            "batch100_ops_per_s_16": _get(g, "batch100.ops_per_s_16"),
            "batch100_request_p50_ms": _get(g, "batch100.request_p50_ms"),
            "in_process_p50_ms": ip.get("p50_ms") if ip.get("available") else "unavailable",
            "in_process_p99_ms": ip.get("p99_ms") if ip.get("available") else "unavailable",
            "floor_p50_ms": b.get("floor_p50_ms"), "dbos_step_ms": b.get("dbos_step_ms"),
            **{f"p50_ms_at_{k}_ops": v.get("p50_ms") for k, v in sc.items() if isinstance(v, dict)},
            **b.get("ratios", {}),
            "wrk_cpu_share_16": _get(b, "load_generator.wrk_cpu_share_of_one_core.c16"),
            "errors": b.get("errors", {}).get("total"),
        }
        if "current/baseline" in b.get("compare", {}):
            row["current/baseline"] = {k: v for k, v in b["compare"]["current/baseline"].items()
                                       if k in ("p50_ms", "p99_ms", "ops_per_s_1", "ops_per_s_16",
                                                "batch1.ops_per_s_16", "batch10.ops_per_s_16",
                                                "batch100.ops_per_s_16")}
        elif "error" in b.get("compare", {}):
            row["current/baseline"] = {"error": b["compare"]["error"]}
        out[name] = row
    n8n = report.get("n8n") or {}
    if "overhead_ms_per_gated_step" in n8n:
        out["n8n_overhead_ms_per_gated_step"] = n8n["overhead_ms_per_gated_step"]
    for name, row in (n8n.get("targets") or {}).items():
        out[f"n8n_{name}"] = row  # {value, target_ms, met}: one `n8n execute` process per run
    for name, row in ((report.get("n8n_server") or {}).get("targets") or {}).items():
        out[f"n8n_server_{name}"] = row  # the same in a running `n8n start` server (production)
    return out


if __name__ == "__main__":
    main()
