"""CLI subcommands of the agents module: `worker`, `env snapshot`, `env restore`."""

import importlib
import json
import os

from ..kernel.errors import LedgerError
from ..store.db import db, init_database
from ..store.migrations import create_schema
from .envsnap import restore, snapshot


def _bind(cfg):
    init_database(cfg.database_url)
    create_schema()


def cmd_worker(args, cfg):
    # Lazy: the OpenAI SDK is the heaviest import of the CLI, and only this command needs it.
    from .openai_client import get_client
    from .worker import run_worker

    _bind(cfg)
    for module in args.handlers or []:
        importlib.import_module(module)  # registers function handlers (actions.register_function)
    with db.connection_context():
        n, p = run_worker(get_client(), owner=args.owner, interval_s=args.interval, poll_interval_s=args.poll_interval,
                          once=args.once)
    if args.once:
        print(json.dumps({"webhooks_processed": n, "sessions_polled": p}))


def _tenant(args):
    return args.tenant or os.environ.get("DURABLE_TENANT") or "default"


def cmd_env_snapshot(args, cfg):
    _bind(cfg)
    with db.connection_context():
        out = snapshot(_tenant(args), args.job, args.directory, args.command or [], args.test_report or [])
    print(json.dumps({k: out[k] for k in ("manifest_sha256", "git", "lock_files", "commands", "test_reports")}
                     | {"files": len(out["files"])}, indent=2))


def cmd_env_restore(args, cfg):
    _bind(cfg)
    with db.connection_context():
        try:
            out = restore(_tenant(args), args.job, args.directory, args.manifest)
        except LedgerError as exc:
            print(json.dumps(exc.to_dict(), indent=2))
            raise ValueError(exc.message) from exc
    print(json.dumps(out, indent=2))


def register(subparsers):
    """Add this module's subcommands to `durable-ledger`."""
    w = subparsers.add_parser("worker", help="process the OpenAI webhook inbox and poll quiet sessions")
    w.add_argument("--owner", default=None, help="lease owner name (default agents-worker:<host>)")
    w.add_argument("--interval", type=float, default=float(os.environ.get("DURABLE_WORKER_INTERVAL_S", "2")))
    w.add_argument("--poll-interval", type=float, default=float(os.environ.get("DURABLE_POLL_INTERVAL_S", "300")),
                   help="re-read sessions with no sync for this many seconds (polling fallback)")
    w.add_argument("--handlers", action="append", help="module that registers function handlers (repeatable)")
    w.add_argument("--once", action="store_true", help="one pass, then exit")
    w.set_defaults(func=cmd_worker)

    env = subparsers.add_parser("env", help="environment snapshot / restore").add_subparsers(
        dest="env_command", required=True)
    snap = env.add_parser("snapshot", help="store DIR's files and manifest for a job")
    snap.add_argument("directory")
    snap.add_argument("--job", required=True)
    snap.add_argument("--tenant", default=None, help="tenant (default $DURABLE_TENANT or 'default')")
    snap.add_argument("--command", action="append", help="a command that was run (repeatable)")
    snap.add_argument("--test-report", action="append", help="a test report file bound to these files (repeatable)")
    snap.set_defaults(func=cmd_env_snapshot)
    rest = env.add_parser("restore", help="rebuild DIR from the job's snapshot and verify every digest")
    rest.add_argument("directory")
    rest.add_argument("--job", required=True)
    rest.add_argument("--tenant", default=None)
    rest.add_argument("--manifest", default=None, help="manifest sha256 (default: the job's latest)")
    rest.set_defaults(func=cmd_env_restore)
