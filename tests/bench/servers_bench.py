"""`make bench`, the server table: the same app factory behind each candidate HTTP server, on
PostgreSQL, side by side in one run (docs/operations.md "The server" keeps the latest table).

Candidates (``--servers``, comma-separated):
- serve      `durable-ledger serve` as shipped (waitress in forked processes, web/server.py)
- gunicorn   stock gunicorn, gthread worker
- granian    granian --interface wsgi (Rust)
- baseline   ``--servers-baseline REF``'s own `serve` (default a92532a: gunicorn with the read-ahead
             worker and the lean lane, the server before waitress), from a git worktree
- serve/WxT  `serve` with W processes x T threads (tuning)
each with ``--workers`` processes x ``--threads`` threads, on a database of its own (all on one
PostgreSQL). gunicorn and granian are bench-only: `make bench-deps` installs them into
$DURABLE_CACHE/bench-servers (``--servers-path``), never into the project's venv.

Per pass, candidates in alternating order (A B C, C B A, ...) so machine noise hits all: the
begin+confirm pair p50 at one connection (keep-alive), gated ops/s at 16 connections with
keep-alive and with `Connection: close` on every request (gate.lua CLOSE=1: a new connection per
request, as the n8n node calls). Medians of the passes; ratios to `serve` and of `serve` to the
baseline. Then, once per candidate, the slow-client probes of ledger-service/tests/slow_clients.py.
"""

import contextlib
import os
import sys
from pathlib import Path

import requests

import run_bench as rb
import slow_clients
from localhost import free_port
from services import Service, ledger_bin, ledger_env

HERE = Path(__file__).resolve().parent
DEFAULT_BASELINE = "a92532a"


def _command(name, port, args, python):
    bind = ["127.0.0.1", str(port)]
    w, t = str(args.workers), str(args.threads)
    if "/" in name:  # a tuning variant, e.g. serve/3x4: 3 processes x 4 threads
        name, shape = name.split("/", 1)
        w, t = shape.split("x")
    if name == "gunicorn":
        return [python, "-m", "gunicorn", "-k", "gthread", "-w", w, "--threads", t, "-b", ":".join(bind),
                "--log-level", "warning", "wsgi_app:create()"]
    if name == "granian":
        return [python, "-m", "granian", "--interface", "wsgi", "--factory", "--workers", w, "--blocking-threads", t,
                "--host", bind[0], "--port", bind[1], "--log-level", "warning", "wsgi_app:create"]
    return [str(ledger_bin()), "serve", "--host", bind[0], "--port", bind[1], "--workers", w, "--threads", t]


def start(name, stack, url, args, work, baseline_tree=None):
    """One candidate on the database ``url``, a leased job `bench`: (url, pgid, fence)."""
    port = free_port()
    env = ledger_env(url, f"bench:runner:{rb.TOKEN}", "WARNING")
    paths = [str(HERE)]  # wsgi_app.py
    if baseline_tree:
        paths.insert(0, str(Path(baseline_tree) / "ledger-service"))  # its own durable_ledger first
    if name in ("gunicorn", "granian", "baseline"):
        paths.append(args.servers_path)  # the candidates (and the baseline's gunicorn), after the project
    env["PYTHONPATH"] = os.pathsep.join(p for p in (*paths, os.environ.get("PYTHONPATH")) if p)
    if not name.startswith("serve"):  # `serve` migrates the schema itself; the others get it from init-db
        rb.subprocess.run([str(ledger_bin()), "init-db"], env=env, check=True, capture_output=True)
    cmd = _command("serve" if name == "baseline" else name, port, args, sys.executable)
    srv = Service.start(name, cmd, env, work / f"{name.replace('/', '_')}.log", ready=f"http://127.0.0.1:{port}/health", timeout=60)
    stack.callback(srv.stop)
    base = f"http://127.0.0.1:{port}"
    s = requests.Session()
    h = {"Authorization": f"Bearer {rb.TOKEN}"}
    s.put(f"{base}/v1/jobs/bench", headers=h, json={}).raise_for_status()
    r = s.post(f"{base}/v1/jobs/bench/lease", headers=h, json={"owner": "bench", "ttl_s": 86400})
    r.raise_for_status()
    return {"url": base, "port": port, "pgid": srv.pid, "fence": r.json()["fencing_token"]}


def one_pass(c, seconds):
    lat = rb.wrk(c["url"], 1, 1, seconds, c["fence"], "bench", pgid=c["pgid"])
    keep = rb.wrk(c["url"], 16, 2, seconds, c["fence"], "bench", pgid=c["pgid"])
    close = rb.wrk(c["url"], 16, 2, seconds, c["fence"], "bench", pgid=c["pgid"], close=True)
    return {"p50_ms": rb.pair_ms(lat, 50), "ops_per_s_16_keepalive": rb.r1(keep["ops_per_s"]),
            "ops_per_s_16_close": rb.r1(close["ops_per_s"]),
            "machine_cpu_busy_share_16": keep["machine_cpu_busy_share"],
            "errors": lat["errors"] + keep["errors"] + close["errors"]}


def compare(args):
    """The server table (a dict for the JSON document)."""
    names = [n for n in args.servers.split(",") if n]
    out = {"candidates": names, "workers": args.workers, "threads": args.threads, "seconds": args.seconds,
           "passes": args.passes, "backend": "postgres"}
    dbs = rb.Databases("postgres")
    baseline = None
    try:
        with contextlib.ExitStack() as stack:
            if "baseline" in names:
                try:
                    baseline = rb.open_baseline(args.servers_baseline)
                    out["baseline"] = {"ref": baseline["ref"], "commit": baseline["commit"],
                                       "subject": baseline["subject"][:120]}
                except Exception as exc:  # measure the others anyway, say why
                    out["baseline"] = {"error": str(exc)}
                    names.remove("baseline")
            running = {}
            for name in list(names):
                try:
                    running[name] = start(name, stack, dbs.new(name.replace("/", "_")), args, dbs.work,
                                          baseline["tree"] if name == "baseline" else None)
                except Exception as exc:  # not installed, does not start: say so, go on
                    rb.log(f"servers: {name} did not start: {exc}")
                    out.setdefault("not_run", {})[name] = f"{type(exc).__name__}: {exc}"[:300]
            for name, c in running.items():
                rb.log(f"servers: warm up {name}")
                rb.wrk(c["url"], 16, 2, max(1, min(2, args.seconds)), c["fence"], "bench", pgid=c["pgid"])
            passes = {name: [] for name in running}
            floors = []
            for p in range(args.passes):
                order = list(running) if p % 2 == 0 else list(reversed(running))
                for name in order:
                    rb.log(f"servers: pass {p + 1}/{args.passes}: {name}")
                    passes[name].append(one_pass(running[name], args.seconds))
                if "serve" in running:
                    floors.append(rb.floor_p50("postgres", _db_of(dbs, "serve")))  # its job `bench`
            table = {name: rb.median_of(ps) for name, ps in passes.items()}
            out["floor_p50_ms"] = rb.med(floors)
            probes = {}
            for name, c in running.items():
                rb.log(f"servers: slow-client probes on {name}")
                probes[name] = slow_clients.summary(slow_clients.probe_all(c["url"], c["port"], c["pgid"]))
            out["table"] = {name: {**row, "slow_clients": probes[name]} for name, row in table.items()}
            out["passes_detail"] = passes
            out["ratios_to_serve"] = _ratios(table, "serve")
            if "baseline" in table and "serve" in table:
                out["serve/baseline"] = {k: rb.ratio(table["serve"][k], table["baseline"][k], 3)
                                         for k in ("ops_per_s_16_close", "ops_per_s_16_keepalive", "p50_ms")}
                out["targets_vs_baseline"] = _targets(out["serve/baseline"])
    finally:
        dbs.close()
    return out


def _db_of(dbs, name):
    return f"{rb.PG_ADMIN.rsplit('/', 1)[0]}/{dbs.prefix}_{name}"


def _ratios(table, ref):
    if ref not in table:
        return {}
    keys = ("ops_per_s_16_keepalive", "ops_per_s_16_close", "p50_ms")
    return {name: {k: rb.ratio(row[k], table[ref][k], 3) for k in keys} for name, row in table.items()}


def _targets(r):
    """The issue's part 5, `serve` against the server before it."""
    def row(value, limit, op):
        ok = None if value is None else (value >= limit if op == ">=" else value <= limit)
        return {"value": value, op: limit, "ok": ok}

    return {"close_ops_ge_1.0x": row(r["ops_per_s_16_close"], 1.0, ">="),
            "keepalive_ops_ge_0.8x": row(r["ops_per_s_16_keepalive"], 0.8, ">="),
            "p50_le_1.1x": row(r["p50_ms"], 1.1, "<=")}
