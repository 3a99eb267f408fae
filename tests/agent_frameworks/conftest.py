"""Gated tools in the OpenAI Agents SDK and LangGraph (issue 39), offline: each agent is a process
(sdk_agent.py, graph_agent.py, forked by forkserver.py) driven by a scripted model or none,
against a refunds API in this process that counts writes (remote.py), with the ledger as
LocalLedger on SQLite or PostgreSQL or as `durable-ledger serve` (HttpLedger). Crashes are kill -9
of the agent while the remote holds the answer to a write it has stored; the run then resumes
from the saved RunState / checkpoint."""

import json
import os
import select
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import psycopg2
import pytest

from localhost import postgres_url
from remote import Refunds

HERE = Path(__file__).resolve().parent
TOKENS = "acme:runner:af-runner-token,acme:approver:af-approver-token"


class ForkServer:
    """forkserver.py for this pytest worker: runs a program in a forked child of a process that
    has imported the frameworks already (see there)."""

    def __init__(self, out_dir):
        self.out_dir, self.lock, self.runs = Path(out_dir), threading.Lock(), 0
        self.proc = subprocess.Popen([sys.executable, str(HERE / "forkserver.py")], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)

    def ask(self, req, timeout=None, on_timeout=None):
        with self.lock:
            self.proc.stdin.write(json.dumps(req) + "\n")
            self.proc.stdin.flush()
            if timeout is not None and not select.select([self.proc.stdout], [], [], timeout)[0]:
                on_timeout()
            line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the fork server exited with {self.proc.wait()}")
        return json.loads(line)

    def start(self, script, args=(), cwd=None, env=None):
        self.runs += 1
        out = self.out_dir / f"run-{self.runs}"
        req = {"run": str(script), "args": list(args), "cwd": str(cwd or Path(script).parent),
               "env": dict(os.environ if env is None else env), "stdout": f"{out}.out", "stderr": f"{out}.err"}
        return Child(self, self.ask(req)["pid"], Path(f"{out}.out"), Path(f"{out}.err"))

    def stop(self):
        self.proc.stdin.close()
        self.proc.wait(30)


class Child:
    def __init__(self, server, pid, stdout, stderr):
        self.server, self.pid, self.stdout, self.stderr = server, pid, stdout, stderr

    def kill(self):
        os.kill(self.pid, signal.SIGKILL)

    def wait(self, timeout=300):
        """The exit code (-9 for SIGKILL); a child still running after ``timeout`` is killed."""
        return self.server.ask({"wait": self.pid}, timeout, self.kill)["returncode"]

    def output(self, timeout=300):
        """Its stdout, after it exited with 0."""
        code = self.wait(timeout)
        assert code == 0, f"exit {code}: " + self.stderr.read_text(errors="replace")[-3000:]
        return self.stdout.read_text()


@pytest.fixture(scope="session", autouse=True)
def forks(tmp_path_factory):
    """This worker's fork server; every `Agent` runs its processes there."""
    server = ForkServer(tmp_path_factory.mktemp("forks"))
    Agent.forks = server
    yield server
    server.stop()


class Agent:
    """One agent's processes (``script``) over one ledger, one remote and one saved state, forked
    by this worker's fork server (`forks`)."""

    forks = None

    def __init__(self, script, ledger_url, db_url, remote, tmp, **cfg):
        self.script, self.db_url, self.remote = HERE / script, db_url, remote
        self.cfg = {"ledger": ledger_url, "token": "af-runner-token", "approver_token": "af-approver-token",
                    "remote": remote.url, "state": str(tmp / "run-state.json"), **cfg}

    def _start(self, over):
        return self.forks.start(self.script, [json.dumps({**self.cfg, **over})])

    def run(self, **over):
        return json.loads(self._start(over).output().strip().splitlines()[-1])

    def crash_after_write(self, **over):
        """Run until the remote has stored a write, then kill -9 the process before it hears back."""
        self.remote.hold()
        child = self._start(over)
        try:
            assert self.remote.written.wait(240), "the agent never wrote"
        finally:
            child.kill()  # SIGKILL
            code = child.wait(30)
            self.remote.release.set()
        assert code == -9

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
