"""Start real `durable-ledger serve` processes for tests (gunicorn, own port, own env)."""

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import requests

BIN = Path(sys.executable).parent / "durable-ledger"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LedgerServer:
    def __init__(self, database_url, tokens, workers=2, threads=8, port=None, log_path=None):
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {**os.environ, "DURABLE_DATABASE_URL": database_url, "DURABLE_BOOTSTRAP_TOKENS": tokens,
                    "DURABLE_LOG_LEVEL": "WARNING"}
        self.args = [str(BIN), "serve", "--host", "127.0.0.1", "--port", str(self.port),
                     "--workers", str(workers), "--threads", str(threads)]
        self.log_path = log_path
        self.proc = None

    def start(self, timeout=30):
        self._log = open(self.log_path, "ab") if self.log_path else None
        out = self._log or subprocess.DEVNULL
        self.proc = subprocess.Popen(self.args, env=self.env, stdout=out, stderr=out, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.stop()
                raise RuntimeError(f"ledger exited with {self.proc.returncode}; see {self.log_path}")
            try:
                if requests.get(self.url + "/health", timeout=1).status_code == 200:
                    return self
            except requests.RequestException:  # refused while binding, or a worker still booting
                pass
            time.sleep(0.1)
        self.stop()  # never leave a half-started server behind
        raise RuntimeError("ledger did not become healthy")

    def stop(self, sig=signal.SIGTERM):
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        if getattr(self, "_log", None):
            self._log.close()
            self._log = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
