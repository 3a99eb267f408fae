"""Numbered schema migrations: how `durable-ledger init-db` / `migrate` upgrades a database.

The database records the migrations it has had in ``schema_version`` (one row per applied
migration: version, name, applied_at). ``migrate_schema()`` runs the pending ones in order, all
in one transaction (PostgreSQL and SQLite both roll DDL back), under a lock so that two
``init-db`` / ``serve`` starting at once do not race (``pg_advisory_xact_lock`` on PostgreSQL,
``BEGIN IMMEDIATE`` on SQLite). Column changes go through ``playhouse.migrate`` (its
SqliteMigrator rebuilds tables where SQLite's ALTER TABLE cannot do the change).

Three kinds of database are recognised:

* **empty** (none of the ledger's tables): every table is created from the current models and
  every migration is recorded as applied: a new database is at head in one step;
* **no ``schema_version`` but ledger tables** (made by release 0.1.0 = commit c91f4dc, or by any
  later build before migrations existed, or by an older one whose init-db added columns ad hoc):
  it is taken as version 0 and every migration runs; migrations are idempotent, so whatever
  the database already has is left as it is;
* **``schema_version`` present**: the migrations after its highest version run; a version
  newer than this code knows is refused (an older release must not write to a newer schema).

After migrating, tables and indexes the models have and the database lacks are created (CREATE
... IF NOT EXISTS never touches data), and every column of the current models must exist, or the
command fails naming what is missing: a column added to a model without a migration is caught on
the first init-db, and tests/test_migrations.py compares an upgraded database with a new one.

Adding a migration: a new module ``mNNNN_<what>.py`` with ``VERSION = NNNN``, ``NAME`` and
``up(schema)`` using the idempotent helpers of :class:`Schema`, listed in ``MIGRATIONS`` below,
plus a case in tests/test_migrations.py. Never edit a released migration.
"""

import time

from peewee import CharField, DoubleField, IntegerField, Model, SqliteDatabase
from playhouse.migrate import PostgresqlMigrator, SqliteMigrator, make_index_name, migrate

from ..agent_models import AGENT_MODELS
from ..console_sessions import SESSION_MODELS
from ..db import db
from ..models import ALL_MODELS
from ..wait_models import WAIT_MODELS
from . import (
    m0001_baseline,
    m0002_approval_denials_and_waits,
    m0003_unambiguous_key_lookups,
    m0004_attempt_dispatcher,
    m0005_console_sessions,
    m0006_operation_field_digests,
    m0007_no_redundant_job_indexes,
    m0008_lease_liveness,
    m0009_approval_policy,
)

MIGRATIONS = [m0001_baseline, m0002_approval_denials_and_waits, m0003_unambiguous_key_lookups,
              m0004_attempt_dispatcher, m0005_console_sessions, m0006_operation_field_digests,
              m0007_no_redundant_job_indexes, m0008_lease_liveness, m0009_approval_policy]
HEAD = MIGRATIONS[-1].VERSION
_PG_LOCK_KEY = 0x6475726C  # "durl": one advisory lock for schema work

assert [m.VERSION for m in MIGRATIONS] == list(range(1, len(MIGRATIONS) + 1)), "migrations must be numbered 1..n"


class SchemaVersion(Model):
    version = IntegerField(primary_key=True)
    name = CharField(max_length=128)
    applied_at = DoubleField()

    class Meta:
        database = db
        table_name = "schema_version"


def current_models():
    return ALL_MODELS + AGENT_MODELS + WAIT_MODELS + SESSION_MODELS


class Schema:
    """Idempotent schema operations for migrations (each checks before it acts)."""

    def __init__(self, database):
        self.db = database
        self.sqlite = isinstance(database, SqliteDatabase)
        self.migrator = SqliteMigrator(database) if self.sqlite else PostgresqlMigrator(database)

    def tables(self):
        return set(self.db.get_tables())

    def columns(self, table):
        return {c.name for c in self.db.get_columns(table)}

    def indexes(self, table):
        return {i.name for i in self.db.get_indexes(table)}

    def create_tables(self, models):
        """CREATE TABLE / INDEX IF NOT EXISTS, from the models as they are now (a later migration
        that changes such a table must therefore accept finding the change already made)."""
        self.db.create_tables(models, safe=True)

    def add_column(self, table, column, field):
        if column in self.columns(table):
            return False
        if not field.null and field.default is None:
            raise RuntimeError(f"cannot add NOT NULL column {table}.{column} without a default")
        self._run(self.migrator.add_column(table, column, field))
        return True

    def drop_column(self, table, column):
        if column not in self.columns(table):
            return False
        self._run(self.migrator.drop_column(table, column))
        return True

    def rename_column(self, table, old, new):
        cols = self.columns(table)
        if old not in cols or new in cols:
            return False
        self._run(self.migrator.rename_column(table, old, new))
        return True

    def add_index(self, table, columns, unique=False):
        if make_index_name(table, columns) in self.indexes(table):
            return False
        self._run(self.migrator.add_index(table, columns, unique))
        return True

    def drop_index(self, table, columns):
        name = make_index_name(table, columns)
        if name not in self.indexes(table):
            return False
        self._run(self.migrator.drop_index(table, name))
        return True

    def add_missing_columns(self, models):
        """Every nullable or defaulted column a model has and its table lacks (release 0.1.0's
        init-db did this ad hoc on every start; the baseline migration does it once)."""
        added = []
        for model in models:
            table = model._meta.table_name
            for field in model._meta.sorted_fields:
                if self.add_column(table, field.column_name, field):
                    added.append(f"{table}.{field.column_name}")
        return added

    def _run(self, operation):
        migrate(operation)


def _locked_txn():
    if isinstance(db.obj, SqliteDatabase):
        return db.atomic("IMMEDIATE")
    return db.atomic()


def _applied_version():
    return SchemaVersion.select(SchemaVersion.version).order_by(SchemaVersion.version.desc()).scalar() or 0


def status():
    """{"version": applied, "head": HEAD, "pending": [...], "state": empty|legacy|versioned}."""
    with db.connection_context():
        tables = set(db.get_tables())
        known = {m._meta.table_name for m in current_models()}
        if "schema_version" in tables:
            version, state = _applied_version(), "versioned"
        else:
            version, state = 0, ("legacy" if tables & known else "empty")
        pending = [] if state == "empty" else [f"{m.VERSION:04d}_{m.NAME}" for m in MIGRATIONS if m.VERSION > version]
        return {"version": version, "head": HEAD, "state": state, "pending": pending}


def migrate_schema():
    """Bring the bound database to HEAD; returns {"version", "applied", "created"}."""
    with db.connection_context():
        with _locked_txn():
            if not isinstance(db.obj, SqliteDatabase):
                db.execute_sql("SELECT pg_advisory_xact_lock(%s)", (_PG_LOCK_KEY,))
            schema = Schema(db.obj)
            tables = schema.tables()
            known = {m._meta.table_name for m in current_models()}
            now = time.time()
            if "schema_version" not in tables:
                db.create_tables([SchemaVersion])
                if not tables & known:  # a new database: straight to head
                    schema.create_tables(current_models())
                    SchemaVersion.insert_many(
                        [{"version": m.VERSION, "name": m.NAME, "applied_at": now} for m in MIGRATIONS]).execute()
                    _verify(schema)
                    return {"version": HEAD, "applied": [], "created": True}
            version = _applied_version()
            if version > HEAD:
                raise RuntimeError(f"database schema version {version} is newer than this release knows ({HEAD}); "
                                   "run the newer release or restore a backup taken before the upgrade")
            applied = []
            for m in MIGRATIONS:
                if m.VERSION <= version:
                    continue
                m.up(schema)
                SchemaVersion.create(version=m.VERSION, name=m.NAME, applied_at=time.time())
                applied.append(f"{m.VERSION:04d}_{m.NAME}")
            # A table or index the models have and the database lacks (dropped by hand, or a new
            # model's table) is created: CREATE ... IF NOT EXISTS never touches data. Columns
            # are another matter: those only ever come from a migration (checked next).
            schema.create_tables(current_models())
            _verify(schema)
            return {"version": HEAD, "applied": applied, "created": False}


def _verify(schema):
    tables = schema.tables()
    missing = []
    for model in current_models():
        table = model._meta.table_name
        if table not in tables:
            missing.append(table)
            continue
        cols = schema.columns(table)
        missing += [f"{table}.{f.column_name}" for f in model._meta.sorted_fields if f.column_name not in cols]
    if missing:
        raise RuntimeError("schema is missing " + ", ".join(missing) +
                           ": a model changed without a migration (add one in durable_ledger/migrations)")


def create_schema():
    """Create or upgrade the schema to this release's (idempotent, leaves existing data alone);
    what `durable-ledger init-db` and every server's start run. Returns `migrate_schema()`'s result."""
    return migrate_schema()
