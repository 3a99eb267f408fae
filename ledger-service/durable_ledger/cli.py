"""`durable-ledger`: init-db / migrate, serve, token create, proxy serve."""

import argparse
import json
import logging
import os
import signal
import subprocess
import sys
import time

from .agents.cli import register as register_agents
from .approvals import waits as approval_waits
from .auth import create_token, list_tokens, revoke_token
from .jobs.report import job_report
from .jobs.retention import prune as prune_operations
from .kernel import logsetup
from .kernel.config import Config
from .kernel.errors import LedgerError
from .reconciliation.setup import configure as configure_reconcilers
from .reconciliation.sweeper import sweep
from .store.db import close_all, db, init_database
from .store.migrations import create_schema
from .store.migrations import status as schema_status


def _bind(cfg):
    init_database(cfg.database_url)


def cmd_init_db(args, cfg):
    _bind(cfg)
    try:
        result = create_schema()
    except RuntimeError as exc:  # a newer schema, or a model change without a migration
        raise ValueError(str(exc)) from exc
    print(json.dumps({"schema": "ok", **result, **cfg.redacted()}))


def cmd_migrate(args, cfg):
    """`migrate`: init-db's upgrade, or with --status only what it would do."""
    if not args.status:
        return cmd_init_db(args, cfg)
    _bind(cfg)
    print(json.dumps({**schema_status(), **cfg.redacted()}))


def cmd_token_create(args, cfg):
    _bind(cfg)
    create_schema()
    with db.connection_context():
        sites = [s for s in (args.sites or "").split(",") if s] or None
        print(create_token(args.tenant, args.role, name=args.name, sites=sites, groups=args.groups))


def cmd_token_revoke(args, cfg):
    """By value (stdin, or --file: never an argument, which would land in shell history and
    the process list) or by --hash, the prefix `token list` prints."""
    _bind(cfg)
    create_schema()
    with db.connection_context():
        if args.hash:
            try:
                n = revoke_token(hash_prefix=args.hash)
            except LedgerError as exc:
                raise ValueError(exc.message) from exc
        else:
            if args.file:
                with open(args.file, encoding="utf-8") as fh:
                    raw = fh.readline().strip()
            else:
                raw = sys.stdin.readline().strip()
            if not raw:
                raise ValueError("no token given: pipe it on stdin, or use --file or --hash")
            n = revoke_token(raw)
    if not n:
        raise ValueError("no live token matches (unknown, or revoked already)")
    print(json.dumps({"revoked": n}))


def cmd_token_list(args, cfg):
    _bind(cfg)
    create_schema()
    with db.connection_context():
        for row in list_tokens(args.tenant):
            print(json.dumps(row))


def cmd_report(args, cfg):
    _bind(cfg)
    with db.connection_context():
        try:
            print(json.dumps(job_report(args.tenant, args.job_id), indent=2))
        except LedgerError as exc:
            raise ValueError(exc.message) from exc


def cmd_sweep(args, cfg):
    _bind(cfg)
    configure_reconcilers(cfg)
    while True:
        with db.connection_context():
            tally = sweep(parse_duration(args.sent_older_than), parse_duration(args.job_idle), args.limit, args.rate)
        if not args.verbose:
            tally.pop("items")
        print(json.dumps(tally), flush=True)
        if not args.interval or not _pause(parse_duration(args.interval)):
            return


def cmd_deliver_approvals(args, cfg):
    """Resume n8n executions waiting for an approval decision (approvals/waits.py)."""
    _bind(cfg)
    hosts = approval_waits.allowed_hosts(cfg.n8n_url, cfg.resume_hosts)
    policy = approval_waits.policy_from(cfg)
    interval = parse_duration(args.interval) if args.interval else 0
    # Adoption (decisions nobody announced) reads every open wait: every few seconds is enough.
    adopt_every = max(1, round(5 / interval)) if interval else 1
    passes = 0
    while True:
        try:
            with db.connection_context():
                tally = approval_waits.deliver_due(hosts, limit=args.limit, adopt=passes % adopt_every == 0, **policy)
        except Exception as exc:  # noqa: BLE001 - a loop next to the server outlives a database blip
            if not interval:
                raise
            logging.getLogger("durable_ledger").warning("approval resume pass failed: %s", type(exc).__name__)
            tally = None
        if not interval or (tally and any(tally.values())):
            print(json.dumps(tally), flush=True)
        if not interval or not _pause(interval):
            return
        passes += 1


def parse_duration(text):
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    text = text.strip().lower()
    if text[-1:] in units:
        return float(text[:-1]) * units[text[-1]]
    return float(text)


def cmd_prune(args, cfg):
    _bind(cfg)
    with db.connection_context():
        print(json.dumps(prune_operations(parse_duration(args.older_than))))


def _serve_http(app_factory, args, max_body_bytes):
    # Imported here, like the two app factories below: every other command (and the sweep and
    # deliver-approvals processes `serve` starts) would otherwise load Flask, the whole API and
    # the OpenAI SDK first. Measured: `durable-ledger --help` 0.06 s with them lazy, 1.2-1.8 s
    # (80 MB) with them at the top.
    from .web import server

    server.run(app_factory, args.host, args.port, args.workers, args.threads, args.read_timeout, max_body_bytes,
               args.connection_limit)


def _helper(argv):
    """A helper process of `serve` that ends with it, even when the master is SIGKILLed (no
    `finally` runs then): the kernel sends it SIGTERM when the master dies (Linux), and its
    loop also leaves when its parent is no longer the one it was started by (other systems,
    and the window between fork and prctl)."""
    env = {**os.environ, "DURABLE_SERVE_PID": str(os.getpid())}
    preexec = None
    if sys.platform.startswith("linux"):
        import ctypes  # loaded here, in the parent: the forked child only makes the call

        libc = ctypes.CDLL(None, use_errno=True)
        preexec = lambda: libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)  # noqa: E731
    return subprocess.Popen([sys.executable, "-m", "durable_ledger.cli", *argv], env=env, preexec_fn=preexec)


PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _parent_alive():
    """False once the `serve` that started this helper is gone (its children are re-parented)."""
    expected = os.environ.get("DURABLE_SERVE_PID")
    return not expected or os.getppid() == int(expected)


def _pause(seconds):
    """Sleep between passes, in slices, leaving early (False) when the parent died."""
    deadline = time.monotonic() + seconds
    while _parent_alive():
        left = deadline - time.monotonic()
        if left <= 0:
            return True
        time.sleep(min(left, 0.5))
    return False


def cmd_serve(args, cfg):
    _bind(cfg)
    create_schema()  # once, in the parent: workers never do schema work per request
    close_all()  # ... and no connection of the parent's survives into the forked workers
    sweeper = deliverer = None
    if args.resume_interval and args.resume_interval.strip().lower() not in ("0", "0s", "off", "no"):
        # Resumes n8n executions parked for an approval; a process of its own, like the sweeper.
        deliverer = _helper(["deliver-approvals", "--interval", args.resume_interval])
    if args.sweep_interval:
        # A separate process, not a thread in the server's parent: workers are forked from it,
        # and a forked copy of a live database connection must never be shared.
        sweeper = _helper(["sweep", "--interval", args.sweep_interval])
    from .app import create_app  # lazy: see _serve_http

    try:
        _serve_http(lambda: create_app(cfg, init_schema=False), args, max(cfg.max_body_bytes, cfg.max_artifact_bytes))
    finally:
        for helper in (sweeper, deliverer):
            if helper is not None:
                helper.terminate()
                helper.wait(10)


def cmd_proxy_serve(args, cfg):
    from .wordpress.proxy import create_proxy_app  # lazy: see _serve_http

    # Media arrive as multipart files or base64 JSON: the body cap follows the media cap.
    media = int(os.environ.get("DURABLE_PROXY_MAX_MEDIA_BYTES", 25 * 2**20))
    _serve_http(lambda: create_proxy_app(), args, max(cfg.max_body_bytes, media * 4 // 3 + 2**20))


def _serve_args(p, port):
    p.add_argument("--host", default=os.environ.get("DURABLE_HOST", "127.0.0.1"))
    p.add_argument("--port", type=int, default=int(os.environ.get("DURABLE_PORT", port)))
    p.add_argument("--workers", type=int, default=int(os.environ.get("DURABLE_WORKERS", "2")),
                   help="server processes (default 2)")
    p.add_argument("--threads", type=int, default=int(os.environ.get("DURABLE_THREADS", "8")),
                   help="request threads per process (default 8)")
    p.add_argument("--read-timeout", type=float, default=float(os.environ.get("DURABLE_READ_TIMEOUT", "15")),
                   help="seconds a connection may send nothing while no request of it runs (idle, or a "
                        "request stalled mid-head or mid-body) before it is closed; default 15")
    p.add_argument("--connection-limit", type=int, default=int(os.environ.get("DURABLE_CONNECTION_LIMIT", "1000")),
                   help="open connections per process; past it the next wait in the kernel's queue (default 1000)")


def build_parser():
    parser = argparse.ArgumentParser(prog="durable-ledger", description="Durable Steps ledger service")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("init-db", help="create or migrate the schema (idempotent)").set_defaults(func=cmd_init_db)
    mig = sub.add_parser("migrate", help="upgrade the schema (same as init-db); --status shows version and pending")
    mig.add_argument("--status", action="store_true", help="print the schema version and pending migrations only")
    mig.set_defaults(func=cmd_migrate)
    serve = sub.add_parser("serve", help="run the ledger API (waitress)")
    _serve_args(serve, 8787)
    serve.add_argument("--sweep-interval", default=os.environ.get("DURABLE_SWEEP_INTERVAL"),
                       help="also run the sweeper every interval (e.g. 60s); default off")
    serve.add_argument("--resume-interval", default=os.environ.get("DURABLE_RESUME_INTERVAL", "1s"),
                       help="resume n8n executions waiting for an approval every interval (default 1s; 0 = off)")
    serve.set_defaults(func=cmd_serve)
    token = sub.add_parser("token", help="manage API tokens").add_subparsers(dest="token_command", required=True)
    create = token.add_parser("create", help="create a token and print it (only its hash is stored)")
    create.add_argument("--tenant", required=True)
    create.add_argument("--role", required=True, choices=["runner", "editor", "approver", "admin"])
    create.add_argument("--name", help="the actor's name (an approval policy names approvers by it)")
    create.add_argument("--groups", help="comma-separated groups an approval policy may name (approvers)")
    create.add_argument("--sites", help="comma-separated WordPress site profiles this token may use (default: all)")
    create.set_defaults(func=cmd_token_create)
    revoke = token.add_parser("revoke", help="revoke a token: its value on stdin (or --file), or --hash PREFIX")
    how = revoke.add_mutually_exclusive_group()
    how.add_argument("--file", help="read the token value from the first line of this file")
    how.add_argument("--hash", help="the token's hash prefix as `token list` prints it (12+ hex digits)")
    revoke.set_defaults(func=cmd_token_revoke)
    tlist = token.add_parser("list", help="list tokens (never their values): id, tenant, role, hash prefix")
    tlist.add_argument("--tenant")
    tlist.set_defaults(func=cmd_token_list)
    proxy = sub.add_parser("proxy", help="the WordPress publishing proxy").add_subparsers(dest="proxy_command", required=True)
    pserve = proxy.add_parser("serve", help="run the publishing proxy (waitress)")
    _serve_args(pserve, 8788)
    pserve.set_defaults(func=cmd_proxy_serve)
    rep = sub.add_parser("report", help="print a job's report (completed / failed / unknown / pending human)")
    rep.add_argument("job_id")
    rep.add_argument("--tenant", required=True)
    rep.set_defaults(func=cmd_report)
    prune = sub.add_parser("prune", help="delete terminal operations older than a window (never in-flight ones)")
    prune.add_argument("--older-than", default=os.environ.get("DURABLE_RETENTION", "30d"),
                       help="e.g. 30d, 12h, 3600 (seconds); default 30d or DURABLE_RETENTION")
    prune.set_defaults(func=cmd_prune)
    da = sub.add_parser("deliver-approvals",
                        help="resume n8n executions waiting for an approval decision (one pass, or --interval)")
    da.add_argument("--limit", type=int, default=50, help="deliveries per pass (default 50)")
    da.add_argument("--interval", default=None, help="repeat every interval (e.g. 1s) instead of once")
    da.set_defaults(func=cmd_deliver_approvals)
    sw = sub.add_parser("sweep", help="reconcile operations stuck in SENT/UNKNOWN and idle jobs")
    sw.add_argument("--sent-older-than", default="300s", help="SENT operations older than this (default 300s)")
    sw.add_argument("--job-idle", default="1h", help="in-flight operations of jobs idle this long (default 1h)")
    sw.add_argument("--limit", type=int, default=500)
    sw.add_argument("--rate", type=float, default=20.0, help="reconciler calls per second at most")
    sw.add_argument("--interval", default=None, help="repeat every interval (e.g. 60s) instead of once")
    sw.add_argument("--verbose", action="store_true", help="print every operation examined")
    sw.set_defaults(func=cmd_sweep)
    register_agents(sub)
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    cfg = Config.from_env()
    logsetup.configure(cfg.log_level)
    try:
        args.func(args, cfg)
    except ValueError as exc:
        print(f"durable-ledger: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
