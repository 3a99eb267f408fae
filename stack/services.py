"""Service processes for the stacks and the tests: one way to start, wait for and stop each.

    svc = Service.start("ledger", ledger_command("serve", port=p), env, workdir / "ledger.log",
                        ready=f"http://127.0.0.1:{p}/health")
    svc.stop()                   # SIGTERM to the whole process group, SIGKILL after 10 s
    svc.stop(signal.SIGKILL)     # a crash: no shutdown hook runs

Every process runs in its own session, so stopping it stops what it started too (`serve`'s
workers, n8n's task runner). The ledger's and the proxy's command lines are written here once
(`ledger_command`); the stacks (pipeline, orders, retry, agent tools), the reconcile harness and
the ledger's own tests build theirs through it. Nothing here imports pytest.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import requests

from localhost import free_port

REPO = Path(__file__).resolve().parent.parent


def ledger_bin() -> Path:
    """`durable-ledger` of the venv this runs in, else of the repository's venv (or DURABLE_VENV_BIN)."""
    here = Path(sys.executable).parent / "durable-ledger"
    if here.exists():
        return here
    return Path(os.environ.get("DURABLE_VENV_BIN", REPO / ".venv" / "bin")) / "durable-ledger"


def ledger_command(*what: str, port: int, workers: int = 1, threads: int = 8, host: str = "127.0.0.1",
                   binary: Path | None = None) -> list[str]:
    """`durable-ledger serve ...` (what=("serve",)) or `durable-ledger proxy serve ...` (("proxy", "serve"))."""
    return [str(binary or ledger_bin()), *what, "--host", host, "--port", str(port),
            "--workers", str(workers), "--threads", str(threads)]


def ledger_env(database_url: str, tokens: str, log_level: str = "INFO", **extra: str) -> dict:
    """The environment a ledger (or proxy) process reads its configuration from (docs/operations.md)."""
    return {**os.environ, "DURABLE_DATABASE_URL": database_url, "DURABLE_BOOTSTRAP_TOKENS": tokens,
            "DURABLE_LOG_LEVEL": log_level, **extra}


def stop_pid(pid: int, sig=signal.SIGTERM):
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def wait_http(url: str, timeout: float = 60, proc: subprocess.Popen | None = None, log: Path | None = None):
    """Until `url` answers below 500. A process that exits meanwhile fails at once, with its log's tail."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            tail = log.read_text(errors="replace")[-3000:] if log and log.exists() else ""
            raise RuntimeError(f"{url}: process exited with {proc.returncode}\n{tail}")
        try:
            if requests.get(url, timeout=2).status_code < 500:
                return
        except requests.RequestException:  # refused while binding, or a worker still booting
            pass
        time.sleep(0.15)
    raise RuntimeError(f"{url} did not answer within {timeout} s")


class Service:
    """A background process in its own session (so a whole group can be stopped), logging to a file."""

    def __init__(self, name, args, env, log_path: Path, cwd=None):
        self.name, self.log_path = name, Path(log_path)
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(args, env=env, stdout=self._log, stderr=self._log, cwd=cwd,
                                     start_new_session=True)
        self.pid = self.proc.pid

    @classmethod
    def start(cls, name, args, env, log_path: Path, ready: str | None = None, timeout: float = 60, cwd=None):
        """Start it and, with `ready` (a URL), wait until it answers; one that never does is stopped."""
        svc = cls(name, args, env, log_path, cwd=cwd)
        if ready:
            try:
                wait_http(ready, timeout=timeout, proc=svc.proc, log=svc.log_path)
            except BaseException:
                svc.stop(signal.SIGKILL)  # never leave a half-started server behind
                raise
        return svc

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, sig=signal.SIGTERM):
        # The whole group, even when its leader has exited: `serve`'s workers may outlive it.
        stop_pid(self.pid, sig)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            stop_pid(self.pid, signal.SIGKILL)
            self.proc.wait(10)
        if not self._log.closed:
            self._log.close()

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


class LedgerServer:
    """`durable-ledger serve` (or, in ProxyServer, `proxy serve`) on its own port, as production
    runs it: start() waits for /health, stop(sig) stops the whole group; a context
    manager. `env` and `args` can be changed before start() (and between stop() and start())."""

    what = ("serve",)
    name = "ledger"

    def __init__(self, database_url, tokens, workers=2, threads=8, port=None, log_path=None, log_level="WARNING",
                 **env: str):
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = ledger_env(database_url, tokens, log_level, **env)
        self.args = ledger_command(*self.what, port=self.port, workers=workers, threads=threads)
        self.log_path = log_path
        self.service: Service | None = None

    @property
    def proc(self) -> subprocess.Popen | None:
        return self.service.proc if self.service else None

    def start(self, timeout=30):
        self.service = Service.start(self.name, self.args, self.env, self.log_path or os.devnull,
                                     ready=self.url + "/health", timeout=timeout)
        return self

    def stop(self, sig=signal.SIGTERM):
        """Stops it if it runs, and closes its log either way (a server that exited by itself too)."""
        if self.service:
            self.service.stop(sig)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


class ProxyServer(LedgerServer):
    """`durable-ledger proxy serve`: the publishing proxy, for the WordPress sites in `sites`."""

    what = ("proxy", "serve")
    name = "proxy"

    def __init__(self, database_url, tokens, sites: dict, port=None, log_path=None, read_timeout="20", **env: str):
        super().__init__(database_url, tokens, workers=1, threads=8, port=port, log_path=log_path,
                         WORDPRESS_SITES=json.dumps(sites), DURABLE_PROXY_READ_TIMEOUT=read_timeout, **env)
