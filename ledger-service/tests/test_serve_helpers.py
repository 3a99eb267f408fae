"""`serve`'s helper processes end with it, SIGKILL included; `token revoke` and `token list`."""

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import TOKENS
from durable_ledger.auth import _cache, authenticate
from durable_ledger.kernel.errors import Unauthorized
from durable_ledger.store.db import db
from servers import BIN, LedgerServer


def _session_processes(sid):
    """Live (not zombie) processes of session ``sid``: pid -> command line."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        state, session = fields[0], int(fields[3])
        if session == sid and state != "Z":
            found[int(entry.name)] = cmdline
    return found


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
def test_serve_helpers_exit_when_the_master_is_killed(database, tmp_path):
    srv = LedgerServer(database, TOKENS, workers=2, threads=2, log_path=tmp_path / "ledger.log")
    srv.args += ["--sweep-interval", "30s", "--resume-interval", "30s"]
    with srv:
        master = srv.proc.pid  # start_new_session: the master leads its own session
        procs = _session_processes(master)
        helpers = [p for p, cmd in procs.items() if " sweep " in cmd + " " or "deliver-approvals" in cmd]
        assert len(helpers) == 2 and len(procs) == 5, procs  # master, 2 workers, 2 helpers
        os.kill(master, signal.SIGKILL)
        srv.proc.wait(10)
        deadline = time.monotonic() + 8
        while _session_processes(master) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = _session_processes(master)
        if left:
            os.killpg(master, signal.SIGKILL)  # leave nothing behind, then fail
        assert left == {}


def _cli(database, *args, stdin=None):
    env = {**os.environ, "DURABLE_DATABASE_URL": database, "DURABLE_LOG_LEVEL": "WARNING"}
    return subprocess.run([str(BIN), *args], env=env, input=stdin, capture_output=True, text=True, timeout=60)


def _works(raw):
    _cache.clear()
    with db.connection_context():
        try:
            return authenticate(raw, ttl=0).tenant == "acme"
        except Unauthorized:
            return False


def test_token_revoke_by_value_file_and_hash_prefix(database, tmp_path):
    made = [_cli(database, "token", "create", "--tenant", "acme", "--role", "runner").stdout.strip()
            for _ in range(3)]
    assert all(raw.startswith("dl_") and _works(raw) for raw in made)
    assert _cli(database, "token", "revoke", stdin=made[0] + "\n").stdout.strip() == '{"revoked": 1}'
    secret = tmp_path / "leaked"
    secret.write_text(made[1] + "\n")
    assert _cli(database, "token", "revoke", "--file", str(secret)).returncode == 0
    listed = _cli(database, "token", "list", "--tenant", "acme").stdout
    assert made[2] not in listed  # never a value
    live = [line for line in listed.splitlines() if '"revoked_at": null' in line]
    assert len(live) == 1
    prefix = live[0].split('"hash": "')[1][:12]
    assert _cli(database, "token", "revoke", "--hash", prefix).returncode == 0
    assert [_works(raw) for raw in made] == [False, False, False]
    again = _cli(database, "token", "revoke", stdin=made[0])
    assert again.returncode == 2 and "no live token" in again.stderr
    assert _cli(database, "token", "revoke", "--hash", "abc").returncode == 2
