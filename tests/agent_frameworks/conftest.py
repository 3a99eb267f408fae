"""Gated tools in the OpenAI Agents SDK and LangGraph (issue 39), offline: each agent is a process
(sdk_agent.py, graph_agent.py) driven by a scripted model or none, against a refunds API in this
process that counts writes (remote.py), with the ledger as LocalLedger on SQLite or PostgreSQL or
as `durable-ledger serve` (HttpLedger). Crashes are kill -9 of the agent while the remote holds
the answer to a write it has stored; the run then resumes from the saved RunState / checkpoint."""

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import psycopg2
import pytest

from localhost import postgres_url
from remote import Refunds

HERE = Path(__file__).resolve().parent
TOKENS = "acme:runner:af-runner-token,acme:approver:af-approver-token"


class Agent:
    """One agent's processes (``script``) over one ledger, one remote and one saved state."""

    def __init__(self, script, ledger_url, db_url, remote, tmp, **cfg):
        self.script, self.db_url, self.remote = HERE / script, db_url, remote
        self.cfg = {"ledger": ledger_url, "token": "af-runner-token", "approver_token": "af-approver-token",
                    "remote": remote.url, "state": str(tmp / "run-state.json"), **cfg}

    def _args(self, over):
        return [sys.executable, str(self.script), json.dumps({**self.cfg, **over})]

    def run(self, **over):
        p = subprocess.run(self._args(over), capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr[-3000:]
        return json.loads(p.stdout.strip().splitlines()[-1])

    def crash_after_write(self, **over):
        """Run until the remote has stored a write, then kill -9 the process before it hears back."""
        self.remote.hold()
        proc = subprocess.Popen(self._args(over), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            assert self.remote.written.wait(240), "the agent never wrote"
        finally:
            proc.kill()  # SIGKILL
            proc.wait(30)
            self.remote.release.set()
        assert proc.returncode == -9

    def expire_approvals(self):
        """Move every approval's expiry into the past (as if its time ran out)."""
        past = time.time() - 1
        if self.db_url.startswith("sqlite:///"):
            with sqlite3.connect(self.db_url[len("sqlite:///"):]) as conn:
                conn.execute("UPDATE approval SET expires_at = ?", (past,))
        else:
            with psycopg2.connect(self.db_url) as conn, conn.cursor() as cur:
                cur.execute("UPDATE approval SET expires_at = %s", (past,))
            conn.close()


@pytest.fixture
def remote():
    r = Refunds()
    yield r
    r.stop()


@pytest.fixture(params=["sqlite", "postgres", "http"])
def ledger(request, tmp_path, pg_database, ledger_server):
    """(ledger URL the agent uses, the database URL behind it)."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'ledger.db'}"
        return url, url
    if request.param == "postgres":
        url = postgres_url(pg_database("agent_frameworks"))
        return url, url
    db = f"sqlite:///{tmp_path / 'served-ledger.db'}"
    return ledger_server(db, TOKENS, workers=1, threads=4).url, db
