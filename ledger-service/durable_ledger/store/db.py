"""The deferred database: bound once per process from DURABLE_DATABASE_URL.

SQLite runs in WAL mode with a busy timeout so several server processes can share one file.
Write transactions on SQLite start with BEGIN IMMEDIATE: a deferred transaction that reads
first and upgrades to a writer later can fail with SQLITE_BUSY *without* waiting for the busy
timeout (two readers both wanting to upgrade deadlock), which would surface as random 500s
under concurrency. Taking the write lock up front makes them queue instead.
"""

import threading
import time
import weakref

from peewee import DatabaseProxy, DataError, IntegrityError, InterfaceError, OperationalError, SqliteDatabase
from playhouse.db_url import connect, parse
from playhouse.pool import PooledDatabase, PooledPostgresqlDatabase

# The driver's errors the features catch, named here so that nothing outside the store imports
# peewee: a unique index refusing a concurrent insert (the caller reads the winner's row), a
# value the database refuses, and a connection that is gone.
__all__ = ["DataError", "IntegrityError", "InterfaceError", "OperationalError", "bind_request_lifecycle", "close_all", "db",
           "database_unavailable", "init_database", "is_pooled", "is_sqlite", "open_request_connection",
           "release_request_connection", "write_txn"]

db = DatabaseProxy()
_bound_url = None
_on_bind = []  # called with the database each time the proxy is bound (store/__init__.py)
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
        elif url.startswith(("postgresql://", "postgres://")):
            # Under `serve` each server process keeps a small pool; connections are per thread.
            params = parse(url)
            database = _Pool(params.pop("database"), max_connections=32, stale_timeout=300, **params)
        else:
            database = connect(url)
        if db.obj is not None and not db.obj.is_closed():
            db.obj.close()
        db.initialize(database)
        _bound_url = url
        for hook in _on_bind:
            hook(database)
        return database


# A pooled PostgreSQL connection checked in less than this long ago is handed out without the
# pool's liveness probe (a `SELECT 1` round trip on every check-out, i.e. on every request). The
# window this opens: PostgreSQL restarted in the last seconds, and the next request on such a
# connection fails once (the driver marks it closed, and the pool discards it) instead of being
# served on a fresh one. Clients retry a failed request; a gate call is idempotent by its key.
_PROBE_AFTER_S = 2.0
_checked_in = weakref.WeakKeyDictionary()
_TXN_UNKNOWN = 4  # psycopg2.extensions.TRANSACTION_STATUS_UNKNOWN: the connection to the server is lost


class _Pool(PooledPostgresqlDatabase):
    def _is_closed(self, conn):
        if conn.closed:
            return True
        recent = time.monotonic() - _checked_in.get(conn, float("-inf")) < _PROBE_AFTER_S
        if recent and conn.info.transaction_status == 0:  # idle, nothing pending
            return False
        return super()._is_closed(conn)

    def _close(self, conn, close_conn=False):
        if conn.closed or conn.info.transaction_status == _TXN_UNKNOWN:
            # This connection broke (PostgreSQL restarted, was killed, or the link was cut): the
            # pool discards it. The others checked in within _PROBE_AFTER_S most likely broke with
            # it; each would fail one request unprobed, so every one is probed at its next check-out.
            _checked_in.clear()
        else:
            _checked_in[conn] = time.monotonic()
        super()._close(conn, close_conn)


def bind_request_lifecycle(app):
    """Open the thread's connection per request; hand PostgreSQL connections back to the pool
    after it. SQLite keeps its per-thread connection: reopening it costs more than a gate call."""

    @app.before_request
    def _connect():
        open_request_connection()

    @app.teardown_request
    def _close(_exc):
        release_request_connection()


def open_request_connection():
    """The thread's connection for one request (the Flask hook above, gate/fast_routes.py)."""
    db.connect(reuse_if_open=True)


def release_request_connection():
    """After a request: a PostgreSQL connection back to the pool; SQLite's stays open."""
    if not is_sqlite() and not db.is_closed():
        db.close()


def close_all():
    """Close every connection this process holds, pooled ones included: before `serve` forks
    its workers. A pooled connection left in the master would be inherited by every worker, and
    two processes writing to one PostgreSQL session interleave their statements."""
    if isinstance(db.obj, PooledPostgresqlDatabase):
        db.obj.close_all()
    elif db.obj is not None and not db.obj.is_closed():
        db.obj.close()


def on_bind(hook):
    """Call ``hook(database)`` whenever `init_database` binds a database (and now, if one is bound)."""
    _on_bind.append(hook)
    if db.obj is not None:
        hook(db.obj)


def is_sqlite():
    return isinstance(db.obj, SqliteDatabase)


def write_txn():
    """A transaction that will write: IMMEDIATE on SQLite (see module docstring)."""
    if is_sqlite():
        return db.atomic("IMMEDIATE")
    return db.atomic()


# SQLite's result codes for a database that cannot be used right now (locked past the busy
# timeout, disk full or failing, file gone), as opposed to an OperationalError that is a bug in
# the SQL (no such table / column, a syntax error), which stays a 500.
_SQLITE_UNAVAILABLE = ("SQLITE_BUSY", "SQLITE_LOCKED", "SQLITE_FULL", "SQLITE_IOERR", "SQLITE_CANTOPEN",
                       "SQLITE_READONLY", "SQLITE_PROTOCOL")
_SQLITE_UNAVAILABLE_TEXT = ("database is locked", "database table is locked", "database or disk is full",
                            "disk i/o error", "unable to open database file", "attempt to write a readonly database")


def database_unavailable(exc):
    """A short description (the driver's class and, for SQLite, its result code) if ``exc`` says the
    database cannot be used right now, else None. On PostgreSQL every OperationalError and
    InterfaceError is one: psycopg2 raises them for a connection refused, lost or closed, the
    server shutting down or crashing, a full disk (SQLSTATE class 08, 53, 57, 58); SQL mistakes are
    ProgrammingError there. SQLite raises OperationalError for SQL mistakes too, so its result
    code decides."""
    if not isinstance(exc, (OperationalError, InterfaceError)):
        return None
    cause = getattr(exc, "orig", None) or exc  # peewee keeps the driver's exception as .orig
    if not is_sqlite():
        return type(cause).__name__
    name = getattr(cause, "sqlite_errorname", "") or ""
    text = str(cause).lower()
    if name.startswith(_SQLITE_UNAVAILABLE) or any(t in text for t in _SQLITE_UNAVAILABLE_TEXT):
        return f"{type(cause).__name__} {name}".strip()
    return None


def is_pooled(database):
    """True for a pooled connection (PostgreSQL under serve): its connections are returned, not closed."""
    return isinstance(database, PooledDatabase)
