"""This machine's services as tests and launchers reach them: a free port for a server we start,
psql against the local PostgreSQL (trust auth, as STACK.md sets it up) and throwaway databases
there. One copy of each."""

from __future__ import annotations

import os
import random
import secrets
import socket
import subprocess
from contextlib import contextmanager
from pathlib import Path

_handed_out: set[int] = set()


def _ephemeral_floor() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _range() -> tuple[int, int]:
    """Where to pick: DURABLE_PORT_RANGE ("lo-hi", set per suite by stack/run_suites.py so that
    suites running side by side never pick the same port), else 15000 up to the ephemeral floor."""
    lo, _, hi = os.environ.get("DURABLE_PORT_RANGE", "").partition("-")
    if lo.isdigit() and hi.isdigit() and int(lo) < int(hi):
        return int(lo), int(hi) + 1
    return 15000, max(15001, _ephemeral_floor())


def free_port() -> int:
    """A free port for a server we start, chosen *below* the kernel's ephemeral range.

    A port from bind(0) lies inside that range, and between our check and the server's own bind
    (seconds, for n8n) any outgoing connection (n8n to Redis or PostgreSQL, the ledger to its
    pool) can take it as its source port: the server then dies with "port already in use".
    Ports below the range are never picked as source ports. Never the same port twice per process.
    """
    lo, hi = _range()
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(lo, hi)
        if port in _handed_out:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    with socket.socket() as s:  # crowded below the range: fall back to the kernel's choice
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def psql(sql: str, db: str = "postgres") -> str:
    """Run one statement as the postgres user; its rows as text (-At). Raises with psql's stderr."""
    out = subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-d", db, "-v", "ON_ERROR_STOP=1", "-Atc", sql],
                         capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise RuntimeError(f"psql {sql!r}: {out.stderr}")
    return out.stdout


@contextmanager
def postgres_database(prefix: str = "durable"):
    """A throwaway PostgreSQL database (`<prefix>_<random>`), dropped WITH (FORCE) when the block ends."""
    name = f"{prefix}_{secrets.token_hex(5)}"
    psql(f'CREATE DATABASE "{name}"')
    try:
        yield name
    finally:
        psql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def postgres_url(name: str) -> str:
    return f"postgresql://postgres@127.0.0.1:5432/{name}"
