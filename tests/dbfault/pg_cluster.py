"""A private PostgreSQL cluster for one suite: its own data directory on a small tmpfs, its own port
and socket directory, so that killing it, stopping it or filling its disk touches nothing else
(the machine's PostgreSQL on 5432 serves the other suites meanwhile).

    cluster = PrivateCluster(workdir, size_mb=160).create()   # mount, initdb, start
    cluster.kill9()        # every process of the cluster, SIGKILL: a crash, no shutdown
    cluster.start()        # crash recovery, then accepting connections
    cluster.stop()         # fast shutdown (connections are terminated)
    cluster.fill_disk() / cluster.free_disk()
    cluster.destroy()      # stop, unmount, remove

Run as root (CI and this machine): the server runs as the `postgres` user, as PostgreSQL refuses
to run as root. The tmpfs is what makes "disk full" a real ENOSPC for the server's own writes.
"""
from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg2


def pg_bindir() -> Path:
    """The newest installed PostgreSQL's programs (Debian: /usr/lib/postgresql/<major>/bin)."""
    root = Path("/usr/lib/postgresql")
    majors = sorted((p for p in root.glob("*/bin") if (p / "initdb").exists()),
                    key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0)
    if not majors:
        raise RuntimeError("no PostgreSQL server programs under /usr/lib/postgresql/*/bin")
    return majors[-1]


class PrivateCluster:
    def __init__(self, workdir: Path, port: int, size_mb: int = 160, say=print):
        # Not under workdir: pytest's temporary directories are 0700 root, which the server's own
        # user could not traverse.
        self.root = Path(tempfile.mkdtemp(prefix="durable-dbfault-pg-"))
        os.chmod(self.root, 0o755)
        self.data = self.root / "data"
        self.sock = self.root / "sock"
        self.filler = self.root / "filler"
        self.port = port
        self.size_mb = size_mb
        self.say = say
        self.bin = pg_bindir()
        self.log_path = Path(workdir) / "postgres.log"
        self.proc: subprocess.Popen | None = None
        self.mounted = False
        user = pwd.getpwnam("postgres") if os.geteuid() == 0 else None
        self._user = user

    # ------------------------------------------------------------------ lifecycle

    def create(self):
        self.root.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={self.size_mb}m,mode=0755", "tmpfs", str(self.root)],
                           check=True)
            self.mounted = True
        self.sock.mkdir(exist_ok=True)
        self._own(self.root, self.sock)
        # 1 MB WAL segments: a full disk is met at a segment switch within seconds, not 16 MB later.
        out = subprocess.run([str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres", "-A", "trust",
                              "--no-sync", "--wal-segsize=1", "-E", "UTF8", "--locale=C"],
                             capture_output=True, text=True, **self._as_postgres())
        if out.returncode != 0:
            raise RuntimeError(f"initdb failed:\n{out.stdout}\n{out.stderr}")
        self.start()
        con = self.connect("postgres")
        con.autocommit = True
        con.cursor().execute("CREATE DATABASE ledger")
        con.close()
        return self

    def start(self, timeout: float = 60) -> float:
        """Start the server (crash recovery first, after a kill); seconds until it accepts."""
        t0 = time.monotonic()
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [str(self.bin / "postgres"), "-D", str(self.data), "-p", str(self.port), "-k", str(self.sock),
             "-c", "listen_addresses=127.0.0.1", "-c", "max_connections=60", "-c", "shared_buffers=16MB",
             "-c", "min_wal_size=4MB", "-c", "max_wal_size=16MB", "-c", "log_min_messages=warning",
             "-c", "restart_after_crash=on"],
            stdout=log, stderr=log, start_new_session=True, **self._as_postgres())
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"postgres exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                self.connect("postgres").close()
                return round(time.monotonic() - t0, 2)
            except psycopg2.OperationalError:
                time.sleep(0.1)
        raise RuntimeError(f"postgres did not accept connections within {timeout} s:\n{self.log_tail()}")

    def pids(self) -> list[int]:
        """The postmaster and every process it started (backends, checkpointer, walwriter, ...)."""
        if self.proc is None or self.proc.poll() is not None:
            return []
        top = self.proc.pid
        out = [top]
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == top:
                out.append(int(stat.parent.name))
        return out

    def kill9(self):
        """kill -9 of the whole server at once (what the OOM killer or a power cut leaves)."""
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.proc is not None:
            self.proc.wait(10)
        self._wait_children_gone()

    def stop(self):
        """A fast shutdown: every connection is terminated, then the server exits."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill9()
        self._wait_children_gone()

    def destroy(self):
        self.free_disk()
        try:
            self.stop()
        except Exception:  # noqa: BLE001 - tear down whatever state the last fault left
            self.kill9()
        if self.mounted:
            subprocess.run(["umount", "-l", str(self.root)], check=False)
            self.mounted = False
        shutil.rmtree(self.root, ignore_errors=True)

    def _wait_children_gone(self, timeout: float = 10):
        deadline = time.monotonic() + timeout
        top = self.proc.pid if self.proc else None
        while top and time.monotonic() < deadline:
            alive = [p for p in Path("/proc").glob("[0-9]*/stat") if _ppid(p) == top]
            if not alive:
                return
            time.sleep(0.05)

    # ------------------------------------------------------------------ the disk

    def fill_disk(self) -> int:
        """Fill the tmpfs the cluster lives on to the last byte; returns the bytes written."""
        written = 0
        chunk = b"\0" * (1 << 20)
        with open(self.filler, "wb", buffering=0) as f:
            for size in (1 << 20, 1 << 12, 1):
                block = chunk[:size]
                while True:
                    try:
                        f.write(block)
                        written += size
                    except OSError:
                        break
        return written

    def free_disk(self):
        try:
            self.filler.unlink()
        except FileNotFoundError:
            pass

    def free_bytes(self) -> int:
        st = os.statvfs(self.root)
        return st.f_bavail * st.f_frsize

    # ------------------------------------------------------------------ access

    def url(self, port: int | None = None, db: str = "ledger") -> str:
        """The URL the ledger is given: through `port` (the relay) or straight to the server."""
        return f"postgresql://postgres@127.0.0.1:{port or self.port}/{db}?sslmode=disable"

    def connect(self, db: str = "ledger"):
        return psycopg2.connect(host="127.0.0.1", port=self.port, user="postgres", dbname=db, connect_timeout=3,
                                sslmode="disable")

    def query(self, sql: str, args=()) -> list[tuple]:
        con = self.connect()
        try:
            with con.cursor() as cur:
                cur.execute(sql, args)
                return cur.fetchall()
        finally:
            con.close()

    def log_tail(self, n: int = 3000) -> str:
        return self.log_path.read_text(errors="replace")[-n:] if self.log_path.exists() else ""

    def _as_postgres(self) -> dict:
        if self._user is None:
            return {}
        return {"user": self._user.pw_uid, "group": self._user.pw_gid, "extra_groups": []}

    def _own(self, *paths):
        if self._user is not None:
            for p in paths:
                os.chown(p, self._user.pw_uid, self._user.pw_gid)


def _ppid(stat: Path) -> int | None:
    try:
        return int(stat.read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None
