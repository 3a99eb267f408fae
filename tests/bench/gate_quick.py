"""Quick gate latency: begin + confirm over HTTP with keep-alive, one client, real server.

Prints JSON. A Python client costs ~1 ms per request by itself here, so these numbers are an
upper bound on the gate; `make bench` (wrk-based) is the real benchmark.
Usage: PYTHONPATH=ledger-service/tests python tests/bench/gate_quick.py [--backend sqlite|postgres] [--n 500]
"""

import argparse
import json
import statistics
import tempfile
import time
import uuid

import psycopg2
import requests

from servers import LedgerServer  # noqa: E402


def run(url, n):
    s = requests.Session()
    h = {"Authorization": "Bearer bench-token"}
    s.put(f"{url}/v1/jobs/bench", headers=h, json={}).raise_for_status()
    tok = s.post(f"{url}/v1/jobs/bench/lease", headers=h, json={"owner": "bench", "ttl_s": 3600}).json()["fencing_token"]
    lat = []
    for i in range(n):
        t0 = time.perf_counter()
        r = s.post(f"{url}/v1/operations/begin", headers=h, json={
            "job_id": "bench", "action": f"step-{i}", "payload": {"i": i}, "fencing_token": tok})
        key = r.json()["operation"]["operation_key"]
        s.post(f"{url}/v1/operations/{requests.utils.quote(key, safe='')}/confirm", headers=h,
               json={"fencing_token": tok, "remote_id": i}).raise_for_status()
        lat.append((time.perf_counter() - t0) * 1000)
    lat.sort()
    return {"n": n, "p50_ms": round(statistics.median(lat), 3), "p99_ms": round(lat[int(n * 0.99) - 1], 3)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    ap.add_argument("--n", type=int, default=500)
    args = ap.parse_args()
    cleanup = None
    if args.backend == "sqlite":
        url = f"sqlite:///{tempfile.mkdtemp()}/bench.db"
    else:
        name = f"durable_bench_{uuid.uuid4().hex[:8]}"
        admin = psycopg2.connect("postgresql://postgres@127.0.0.1:5432/postgres")
        admin.autocommit = True
        admin.cursor().execute(f'CREATE DATABASE "{name}"')
        url = f"postgresql://postgres@127.0.0.1:5432/{name}"

        def cleanup():
            admin.cursor().execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    try:
        with LedgerServer(url, "bench:runner:bench-token", workers=2) as srv:
            result = run(srv.url, args.n)
    finally:
        if cleanup:
            cleanup()
    print(json.dumps({"backend": args.backend, "begin_plus_confirm": result}))


if __name__ == "__main__":
    main()
