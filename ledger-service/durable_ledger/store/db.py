"""The deferred database: bound once per process from DURABLE_DATABASE_URL.

SQLite runs in WAL mode with a busy timeout so several gunicorn workers can share one file.
Write transactions on SQLite start with BEGIN IMMEDIATE: a deferred transaction that reads
first and upgrades to a writer later can fail with SQLITE_BUSY *without* waiting for the busy
timeout (two readers both wanting to upgrade deadlock), which would surface as random 500s
under concurrency. Taking the write lock up front makes them queue instead.
"""

import threading

from peewee import DatabaseProxy, SqliteDatabase
from playhouse.db_url import connect

db = DatabaseProxy()
_bound_url = None
_lock = threading.Lock()


def init_database(url):
    """Bind the proxy to ``url`` (idempotent for the same url within a process)."""
    global _bound_url
    with _lock:
        if _bound_url == url and db.obj is not None:
            return db.obj
        if url.startswith("sqlite"):
            database = connect(
                url,
                pragmas={
                    "journal_mode": "wal",
                    "busy_timeout": 10000,
                    "synchronous": "normal",
                    "foreign_keys": 1,
                },
                timeout=10,
                check_same_thread=False,
            )
        else:
            # Under gunicorn each worker keeps a small pool; connections are per thread.
            if url.startswith("postgresql://") or url.startswith("postgres://"):
                url = "postgresql+pool://" + url.split("://", 1)[1]
            database = connect(url, max_connections=32, stale_timeout=300)
        if db.obj is not None and not db.obj.is_closed():
            db.obj.close()
        db.initialize(database)
        _bound_url = url
        return database


def bind_request_lifecycle(app):
    """Open the thread's connection per request; hand PostgreSQL connections back to the pool
    after it. SQLite keeps its per-thread connection: reopening it costs more than a gate call."""

    @app.before_request
    def _connect():
        db.connect(reuse_if_open=True)

    @app.teardown_request
    def _close(_exc):
        if not is_sqlite() and not db.is_closed():
            db.close()


def is_sqlite():
    return isinstance(db.obj, SqliteDatabase)


def write_txn():
    """A transaction that will write: IMMEDIATE on SQLite (see module docstring)."""
    if is_sqlite():
        return db.atomic("IMMEDIATE")
    return db.atomic()
