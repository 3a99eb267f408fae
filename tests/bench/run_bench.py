"""`make bench`: the gate's cost side by side with the raw SQL floor and DBOS, in one run.

For each backend (SQLite, PostgreSQL) on this machine:
- gate = `begin` + `confirm` through the real HTTP API (keep-alive, authenticated, validated,
  fenced, event-logged), driven by wrk + Lua (a Python client alone costs ~1 ms a request);
  p50/p99 at 1 connection (requests alternate begin/confirm, so the pair costs 2 x request
  p50) and throughput at 16 connections; wrk's own CPU share is reported;
- floor = the same two statements (INSERT the SENT row, UPDATE it to CONFIRMED) through the
  driver directly, autocommit;
- DBOS Transact's per-step cost (`@DBOS.step()` in a workflow) on the same kind of database;
- latency again with 10k and 1M operations already in the ledger.
Prints one JSON document. Numbers are only comparable within one run: report ratios.
"""

import argparse
import json
import os
import platform
import re
import resource
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
sys.path.insert(0, str(HERE.parents[1] / "ledger-service" / "tests"))
from servers import LedgerServer  # noqa: E402

PG_ADMIN = os.environ.get("DURABLE_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
TOKEN = "bench-token"


def log(msg):
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


def wrk(url, conns, threads, seconds, fence, job, script="gate.lua", batch=1):
    env = {**os.environ, "TOKEN": TOKEN, "JOB": job, "FENCE": str(fence), "PREFIX": uuid.uuid4().hex[:8],
           "BATCH": str(batch)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run(["wrk", f"-t{threads}", f"-c{conns}", f"-d{seconds}s", "--latency", "-s",
                          str(HERE / script), url], env=env, capture_output=True, text=True, check=True).stdout
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    data = json.loads(re.search(r"WRKJSON (\{.*\})", out).group(1))
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    data["rps"] = data["requests"] / (data["duration_us"] / 1e6)
    data["wrk_cpu_share_of_one_core"] = round(cpu / wall, 3)
    return data


def gate(url, job, fence, seconds):
    wrk(url, 1, 1, 2, fence, job)  # warm up connections, caches, JIT-less Python paths
    lat = wrk(url, 1, 1, seconds, fence, job)
    thr = wrk(url, 16, 2, seconds, fence, job)
    # The batch endpoint: each request confirms the previous 10 steps and gates 10 new ones.
    bat = wrk(url, 16, 2, seconds, fence, job, script="gate_batch.lua", batch=10)
    return {
        "gate_batch10_ops_per_s_16": round(bat["rps"] * 10, 1),
        "gate_batch10_request_p50_ms": round(bat["p50_us"] / 1000, 3),
        "gate_p50_ms": round(2 * lat["p50_us"] / 1000, 3),
        "gate_p99_ms": round(2 * lat["p99_us"] / 1000, 3),
        "request_p50_ms": round(lat["p50_us"] / 1000, 3),
        "gate_ops_per_s_16": round(thr["rps"] / 2, 1),
        "errors": sum(r["errors_status"] + r["errors_socket"] for r in (lat, thr, bat)),
        "wrk_cpu_share_16": thr["wrk_cpu_share_of_one_core"],
    }


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


def floor_pg(dsn, n=2000):
    conn = psycopg2.connect(dsn)
    conn.autocommit = True
    cur = conn.cursor()
    cur.execute("SELECT id FROM job WHERE job_id = 'bench'")
    return _floor(conn, "%s", cur.fetchone()[0], n)


def floor_sqlite(path, n=2000):
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=wal")
    conn.execute("PRAGMA synchronous=normal")
    return _floor(conn, "?", conn.execute("SELECT id FROM job WHERE job_id = 'bench'").fetchone()[0], n)


def preload(backend, target, url_or_path, dsn=None):
    """Top the ledger up to ``target`` operations (a separate bulk job) in one statement."""
    sql_job = "INSERT INTO job (tenant, job_id, task_version, pipeline, status, cost, resume_attempts," \
              " created_at, updated_at) VALUES ('bench', 'bulk', 1, 'generic', 'active', 0, 0, 0, 0)"
    if backend == "postgres":
        conn = psycopg2.connect(dsn)
        conn.autocommit = True
        cur = conn.cursor()
        cur.execute("SELECT count(*) FROM operation")
        have = cur.fetchone()[0]
        cur.execute("SELECT id FROM job WHERE job_id = 'bulk'")
        row = cur.fetchone()
        if row is None:
            cur.execute(sql_job + " RETURNING id")
            row = cur.fetchone()
        if target > have:
            cur.execute("INSERT INTO operation (tenant, operation_key, job_id, task_version, action, request_hash,"
                        " state, attempt, max_attempts, fencing_token, requires_approval, reconcile_attempts,"
                        " created_at, updated_at) SELECT 'bench', 'bulk:' || g || ':' || %s, %s, 1, 'bulk', "
                        " md5(g::text) || md5(g::text), 'CONFIRMED', 1, 3, 1, false, 0, 0, 0"
                        " FROM generate_series(1, %s) g", (uuid.uuid4().hex[:6], row[0], target - have))
            cur.execute("ANALYZE operation")
        conn.close()
    else:
        conn = sqlite3.connect(url_or_path, isolation_level=None)
        have = conn.execute("SELECT count(*) FROM operation").fetchone()[0]
        row = conn.execute("SELECT id FROM job WHERE job_id = 'bulk'").fetchone()
        if row is None:
            conn.execute(sql_job)
            row = conn.execute("SELECT id FROM job WHERE job_id = 'bulk'").fetchone()
        if target > have:
            tag = uuid.uuid4().hex[:6]
            conn.execute("WITH RECURSIVE g(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM g WHERE x < ?)"
                         " INSERT INTO operation (tenant, operation_key, job_id, task_version, action, request_hash,"
                         " state, attempt, max_attempts, fencing_token, requires_approval, reconcile_attempts,"
                         " created_at, updated_at) SELECT 'bench', 'bulk:' || x || ':' || ?, ?, 1, 'bulk',"
                         " hex(randomblob(32)), 'CONFIRMED', 1, 3, 1, 0, 0, 0, 0 FROM g",
                         (target - have, tag, row[0]))
            conn.execute("ANALYZE")
        conn.close()


def dbos_step_ms(python, url):
    out = subprocess.run([python, str(HERE / "dbos_peer.py"), url, "300"], capture_output=True, text=True,
                         timeout=600)
    if out.returncode != 0:
        return {"error": out.stderr.strip().splitlines()[-1] if out.stderr else "failed"}
    return json.loads(out.stdout.strip().splitlines()[-1])["step_ms"]


def run_backend(backend, args):
    work = Path(tempfile.mkdtemp(prefix=f"bench-{backend}-"))
    admin = None
    if backend == "postgres":
        name = f"durable_bench_{uuid.uuid4().hex[:8]}"
        dbos_name = name + "_dbos"
        admin = psycopg2.connect(PG_ADMIN)
        admin.autocommit = True
        for n in (name, dbos_name):
            admin.cursor().execute(f'CREATE DATABASE "{n}"')
        base = PG_ADMIN.rsplit("/", 1)[0]
        url, dbos_url = f"{base}/{name}", f"{base}/{dbos_name}"
    else:
        url = f"sqlite:///{work}/ledger.db"
        dbos_url = f"sqlite:///{work}/dbos.sqlite"
    try:
        with LedgerServer(url, f"bench:runner:{TOKEN}", workers=args.workers, threads=args.threads,
                          log_path=work / "ledger.log") as srv:
            s = requests.Session()
            h = {"Authorization": f"Bearer {TOKEN}"}
            s.put(f"{srv.url}/v1/jobs/bench", headers=h, json={}).raise_for_status()
            fence = s.post(f"{srv.url}/v1/jobs/bench/lease", headers=h,
                           json={"owner": "bench", "ttl_s": 86400}).json()["fencing_token"]
            log(f"{backend}: gate (wrk)")
            result = gate(srv.url, "bench", fence, args.seconds)
            log(f"{backend}: floor")
            result["floor_p50_ms"] = floor_pg(url) if backend == "postgres" else floor_sqlite(f"{work}/ledger.db")
            if args.dbos_python:
                log(f"{backend}: DBOS peer")
                result["dbos_step_ms"] = dbos_step_ms(args.dbos_python, dbos_url)
            scale = {}
            for target in args.scale:
                log(f"{backend}: preload to {target} operations")
                preload(backend, target, f"{work}/ledger.db", url if backend == "postgres" else None)
                lat = wrk(srv.url, 1, 1, args.seconds, fence, "bench")
                scale[str(target)] = round(2 * lat["p50_us"] / 1000, 3)
            result["gate_p50_ms_at_ops"] = scale
    finally:
        if admin is not None:
            for n in (name, dbos_name):
                admin.cursor().execute(f'DROP DATABASE IF EXISTS "{n}" WITH (FORCE)')
            admin.close()
    f, d, g = result["floor_p50_ms"], result.get("dbos_step_ms"), result["gate_p50_ms"]
    result["ratio_gate_to_floor"] = round(g / f, 2) if f else None
    result["ratio_gate_to_dbos_step"] = round(g / d, 2) if isinstance(d, (int, float)) and d else None
    if len(scale) >= 2:
        first, last = list(scale.values())[0], list(scale.values())[-1]
        result["latency_growth_first_to_last"] = round(last / first, 2)
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backends", default="sqlite,postgres")
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--dbos-python", default=None, help="python of a venv with dbos installed")
    ap.add_argument("--scale", default="10000,1000000", help="operation counts to measure latency at")
    ap.add_argument("--n8n-results", default=None, help="JSON written by the n8n end-to-end overhead measurement")
    args = ap.parse_args()
    args.scale = [int(x) for x in args.scale.split(",") if x]
    report = {"machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                          "python": platform.python_version()},
              "workers": args.workers, "threads": args.threads, "seconds": args.seconds, "backends": {}}
    for backend in args.backends.split(","):
        report["backends"][backend] = run_backend(backend, args)
    if args.n8n_results and Path(args.n8n_results).exists():
        n8n = json.loads(Path(args.n8n_results).read_text())
        report["n8n"] = {"runs": n8n.get("runs"), "execution_ms_median": n8n.get("execution_ms_median"),
                         "node_ms_median": n8n.get("node_ms_median"),
                         "overhead_ms_per_gated_step": n8n.get("overhead_ms_per_gated_step")}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
