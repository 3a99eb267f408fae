"""Where a begin+confirm pair's time goes inside the ledger's process (docs/performance.md).

Calls the WSGI app directly with a ready-made environ (no socket, no server, no test client),
so what is measured is the server's side of a request: after WARMUP pairs and an ANALYZE, the
wall and CPU medians of 5 x 300 pairs, then one cProfile of 500 pairs with its own time grouped by package.
On a fresh PostgreSQL database (or SQLite) that is dropped at the end.

  PYTHONPATH=<tree>/ledger-service .venv/bin/python tests/bench/profile_pairs.py [--backend postgres|sqlite]

With PYTHONPATH pointing at another tree (a `git worktree` of a baseline), the same script
profiles that tree: prints one JSON line. PROFILE_TOP=30 also prints the 30 functions with the
most own time to stderr.
"""

import argparse
import cProfile
import io
import json
import os
import pstats
import statistics
import sys
import tempfile
import time
import uuid

import psycopg2

PG_ADMIN = os.environ.get("DURABLE_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")
WARMUP, ROUNDS, PER_ROUND, PROFILED = 600, 5, 300, 500
GROUPS = (("cursor.execute", ("method 'execute' of 'psycopg2",)), ("werkzeug", ("werkzeug",)),
          ("flask", ("flask",)), ("marshmallow", ("marshmallow",)), ("peewee", ("peewee", "playhouse")),
          ("json", ("json/", "_json")), ("durable_ledger", ("durable_ledger",)))


def _admin():
    conn = psycopg2.connect(PG_ADMIN)
    conn.autocommit = True
    return conn


class Pairs:
    def __init__(self, app):
        self.app, self.n = app, 0
        self.auth = "Bearer bench-token"
        self.token = self._call("POST", "/v1/jobs/bench/lease", {"owner": "bench", "ttl_s": 86400}, put_job=True)[
            "fencing_token"]

    def _call(self, method, path, body, put_job=False):
        if put_job:
            self._call("PUT", "/v1/jobs/bench", {})
        raw = json.dumps(body).encode()
        environ = {"REQUEST_METHOD": method, "PATH_INFO": path, "QUERY_STRING": "", "SCRIPT_NAME": "",
                   "SERVER_NAME": "localhost", "SERVER_PORT": "80", "SERVER_PROTOCOL": "HTTP/1.1",
                   "wsgi.url_scheme": "http", "wsgi.input": io.BytesIO(raw), "wsgi.errors": io.StringIO(),
                   "wsgi.multithread": True, "wsgi.multiprocess": False, "wsgi.run_once": False,
                   "wsgi.version": (1, 0), "CONTENT_TYPE": "application/json", "CONTENT_LENGTH": str(len(raw)),
                   "HTTP_AUTHORIZATION": self.auth, "HTTP_HOST": "localhost", "REMOTE_ADDR": "127.0.0.1"}
        status = []
        out = b"".join(self.app(environ, lambda s, h, exc=None: status.append(s)))
        if not status[0].startswith(("200", "201")):
            raise RuntimeError(f"{method} {path}: {status[0]} {out[:300]!r}")
        return json.loads(out)

    def pair(self):
        self.n += 1
        answer = self._call("POST", "/v1/operations/begin", {"job_id": "bench", "action": f"step-{self.n}",
                                                             "payload": {"title": "T", "n": self.n},
                                                             "fencing_token": self.token})
        assert answer["decision"] == "dispatch", answer
        key = answer["operation"]["operation_key"]
        self._call("POST", f"/v1/operations/{key}/confirm", {"fencing_token": self.token, "remote_id": self.n})


def _groups(prof):
    stats = pstats.Stats(prof)
    out = dict.fromkeys([g for g, _ in GROUPS] + ["other"], 0.0)
    calls = 0
    for (path, _line, name), (_cc, nc, tt, _ct, _callers) in stats.stats.items():
        calls += nc
        where = f"{path} {name}"
        group = next((g for g, marks in GROUPS if any(m in where for m in marks)), "other")
        out[group] += tt
    return {k: round(v * 1000 / PROFILED, 3) for k, v in out.items()}, calls // PROFILED


def run(url):
    from durable_ledger.app import create_app
    from durable_ledger.kernel.config import Config
    from durable_ledger.store.db import db

    app = create_app(Config(database_url=url, bootstrap_tokens="acme:runner:bench-token", log_level="WARNING"))
    pairs = Pairs(app)
    for _ in range(WARMUP):
        pairs.pair()
    if url.startswith("postgres"):
        with db.connection_context():
            db.execute_sql("ANALYZE")
    walls, cpus = [], []
    for _ in range(ROUNDS):
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(PER_ROUND):
            pairs.pair()
        walls.append((time.perf_counter() - t0) * 1000 / PER_ROUND)
        cpus.append((time.process_time() - c0) * 1000 / PER_ROUND)
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(PROFILED):
        pairs.pair()
    prof.disable()
    groups, calls = _groups(prof)
    if os.environ.get("PROFILE_TOP"):  # the hottest functions by own time, to stderr
        pstats.Stats(prof, stream=sys.stderr).sort_stats("tottime").print_stats(int(os.environ["PROFILE_TOP"]))
    # CPU: this process's own (Python and the driver's client side), without the database's
    return {"wall_ms_per_pair": round(statistics.median(walls), 3), "walls": [round(w, 3) for w in walls],
            "cpu_ms_per_pair": round(statistics.median(cpus), 3),
            "profiled_ms_per_pair_by_package": groups, "function_calls_per_pair": calls}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="postgres", choices=["postgres", "sqlite"])
    args = ap.parse_args()
    if args.backend == "sqlite":
        with tempfile.TemporaryDirectory() as tmp:
            print(json.dumps({"backend": "sqlite", **run(f"sqlite:///{tmp}/ledger.db")}))
        return
    name = f"durable_profile_{uuid.uuid4().hex[:10]}"
    with _admin().cursor() as cur:
        cur.execute(f'CREATE DATABASE "{name}"')
    try:
        print(json.dumps({"backend": "postgres", **run(f"{PG_ADMIN.rsplit('/', 1)[0]}/{name}")}))
    finally:
        from durable_ledger.store.db import close_all

        close_all()
        with _admin().cursor() as cur:
            cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


if __name__ == "__main__":
    main()
