"""Upgrades lose nothing: a database made by the previous release (0.1.0 = commit c91f4dc, built
from `git archive` as its own wheel and run as its own `durable-ledger`, with traffic through its
HTTP API) is brought to the current schema by today's `durable-ledger init-db`, on SQLite and on
PostgreSQL (a database of its own per run, dropped at the end). Rows per table are counted before
and after, then the gate runs on the migrated data with the current code.
"""

import json
import os
import subprocess
import sys
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path
from urllib.parse import quote

import pytest
import requests

from conftest import PG_ADMIN_DSN, _pg_admin
from durable_ledger.kernel.config import Config
from durable_ledger.kernel.digest import request_digest
from durable_ledger.store.db import db, init_database
from servers import free_port

PREVIOUS_RELEASE = "c91f4dc"
CACHE = Path(os.environ.get("DURABLE_RELEASE_CACHE", Path.home() / ".cache" / "durable-steps" / "releases"))
REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent / "durable-ledger"
EXPECTED_MIGRATIONS = ["0001_baseline_0_1_0", "0002_approval_denials_and_waits", "0003_unambiguous_key_lookups",
                       "0004_attempt_dispatcher", "0005_console_sessions", "0006_operation_field_digests",
                       "0007_no_redundant_job_indexes", "0008_lease_liveness", "0009_approval_policy"]


@pytest.fixture(scope="session")
def old_release():
    """The previous release's wheel installed into a directory of its own (cached by commit)."""
    target = CACHE / PREVIOUS_RELEASE
    site = target / "site"
    if not (site / "durable_ledger" / "cli.py").exists():
        src = target / "src"
        src.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "-C", str(REPO), "archive", PREVIOUS_RELEASE, "ledger-service"],
                                 check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
        wheels = target / "wheel"
        # As `make dist` builds the release: PEP 517 build in an isolated environment.
        subprocess.run([sys.executable, "-m", "build", "--wheel", "--outdir", str(wheels), str(src / "ledger-service")],
                       check=True, capture_output=True)
        (wheel,) = wheels.glob("durable_ledger-*.whl")
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(wheel)],
                       check=True)
    if not (site / "gunicorn").exists():
        # The previous release serves under gunicorn, which this release no longer depends on
        # (it serves on waitress): its server goes beside its own package, not into the venv.
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site),
                        "gunicorn>=23,<24"], check=True)
    return site


class Old:
    """Run the previous release's CLI: its own package first on the path, cwd outside the tree."""

    def __init__(self, site, url, cwd):
        self.env = {**os.environ, "PYTHONPATH": str(site), "DURABLE_DATABASE_URL": url,
                    "DURABLE_BOOTSTRAP_TOKENS": "", "DURABLE_LOG_LEVEL": "WARNING"}
        self.cwd = cwd

    def cli(self, *args):
        out = subprocess.run([sys.executable, "-m", "durable_ledger.cli", *args], env=self.env, cwd=self.cwd,
                             check=True, capture_output=True, text=True, timeout=60)
        return out.stdout.strip()


@pytest.fixture(params=["sqlite", "postgres"])
def fresh_url(request, tmp_path):
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'upgrade.db'}"
        return
    name = f"durable_upgrade_{uuid.uuid4().hex[:10]}"
    conn = _pg_admin()
    with conn.cursor() as cur:
        cur.execute(f'CREATE DATABASE "{name}"')
    conn.close()
    yield f"{PG_ADMIN_DSN.rsplit('/', 1)[0]}/{name}"
    if db.obj is not None:
        if not db.is_closed():
            db.close()
        if hasattr(db.obj, "close_all"):
            db.obj.close_all()
    conn = _pg_admin()
    with conn.cursor() as cur:
        cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    conn.close()


def row_counts(url):
    init_database(url)
    with db.connection_context():
        return {t: db.execute_sql(f'SELECT COUNT(*) FROM "{t}"').fetchone()[0] for t in db.get_tables()}


def schema_shape(url):
    init_database(url)
    with db.connection_context():
        return {t: (sorted(c.name for c in db.get_columns(t)), sorted(i.name for i in db.get_indexes(t)))
                for t in db.get_tables()}


def old_traffic(old, cwd):
    """Jobs, a lease, CONFIRMED (with receipt) and SENT operations, a checkpoint, an approval."""
    runner = old.cli("token", "create", "--tenant", "acme", "--role", "runner", "--name", "n8n")
    approver = old.cli("token", "create", "--tenant", "acme", "--role", "approver", "--name", "ed")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen([sys.executable, "-m", "durable_ledger.cli", "serve", "--port", str(port),
                             "--workers", "1", "--threads", "4"], env=old.env, cwd=cwd,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        for _ in range(300):
            try:
                if requests.get(url + "/health", timeout=1).status_code == 200:
                    break
            except requests.RequestException:
                pass
            assert proc.poll() is None, "the old release's serve exited"
            time.sleep(0.1)
        s = requests.Session()
        s.headers["Authorization"] = f"Bearer {runner}"
        assert s.put(f"{url}/v1/jobs/m1", json={"pipeline": "article"}).status_code == 201
        assert s.put(f"{url}/v1/jobs/m2", json={"pipeline": "generic"}).status_code == 201
        tok = s.post(f"{url}/v1/jobs/m1/lease", json={"owner": "exec-1", "ttl_s": 3600}).json()["fencing_token"]
        draft = {"job_id": "m1", "action": "create_draft", "payload": {"title": "T"}, "fencing_token": tok}
        first = s.post(f"{url}/v1/operations/begin", json=draft).json()
        assert first["decision"] == "dispatch"
        key = quote(first["operation"]["operation_key"], safe="")
        r = s.post(f"{url}/v1/operations/{key}/confirm",
                   json={"fencing_token": tok, "remote_id": 101, "receipt": {"link": "https://example.test/?p=101"}})
        assert r.json()["operation"]["state"] == "CONFIRMED"
        seo = {"job_id": "m1", "action": "set_seo", "payload": {"meta": "d"}, "fencing_token": tok}
        assert s.post(f"{url}/v1/operations/begin", json=seo).json()["decision"] == "dispatch"  # left SENT
        sent_answer = s.post(f"{url}/v1/operations/begin", json=seo).json()
        r = s.post(f"{url}/v1/jobs/m1/checkpoints", json={
            "fencing_token": tok, "phase": "SOURCES_COLLECTED",
            "artifacts": [{"role": "sources", "uri": "file:///x", "sha256": "b" * 64}]})
        assert r.status_code == 201, r.text
        publish = {"title": "T", "content": "final"}
        r = s.post(f"{url}/v1/operations/begin", json={"job_id": "m1", "action": "publish", "payload": publish,
                                                       "fencing_token": tok, "target": "wordpress:test:101"})
        assert r.json()["reason"] == "approval_required", r.text
        expires = (datetime.now(timezone.utc) + timedelta(hours=1)).isoformat()
        r = requests.post(f"{url}/v1/approvals", headers={"Authorization": f"Bearer {approver}"}, json={
            "job_id": "m1", "task_version": 1, "action": "publish", "content_digest": request_digest(publish),
            "target": "wordpress:test:101", "expires_at": expires})
        assert r.status_code == 201, r.text
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(15)
    return {"runner": runner, "fencing_token": tok, "draft": draft, "seo": seo, "sent_answer": sent_answer,
            "publish": publish}


def test_previous_release_database_upgrades_without_loss(old_release, fresh_url, tmp_path):
    old = Old(old_release, fresh_url, tmp_path)
    where = subprocess.run([sys.executable, "-c", "import durable_ledger.models as m; print(m.__file__)"],
                           env=old.env, cwd=tmp_path, capture_output=True, text=True, check=True).stdout
    assert where.startswith(str(old_release)), where  # the old wheel, not the source tree
    assert json.loads(old.cli("init-db"))["schema"] == "ok"
    seen = old_traffic(old, tmp_path)
    before = row_counts(fresh_url)
    assert "schema_version" not in before
    for table in ("api_token", "job", "lease", "operation", "operation_event", "checkpoint", "approval",
                  "audit_log"):
        assert before[table] > 0, table
    if not db.is_closed():
        db.close()

    env = {**os.environ, "DURABLE_DATABASE_URL": fresh_url, "DURABLE_BOOTSTRAP_TOKENS": ""}
    status = json.loads(subprocess.run([str(BIN), "migrate", "--status"], env=env, check=True,
                                       capture_output=True, text=True).stdout)
    assert (status["state"], status["version"], status["pending"]) == ("legacy", 0, EXPECTED_MIGRATIONS)
    out = json.loads(subprocess.run([str(BIN), "init-db"], env=env, check=True, capture_output=True,
                                    text=True).stdout)
    assert (out["applied"], out["version"]) == (EXPECTED_MIGRATIONS, len(EXPECTED_MIGRATIONS))
    again = json.loads(subprocess.run([str(BIN), "migrate"], env=env, check=True, capture_output=True,
                                      text=True).stdout)
    assert again["applied"] == []  # idempotent

    after = row_counts(fresh_url)
    assert {t: n for t, n in after.items() if t in before} == before
    assert after["schema_version"] == len(EXPECTED_MIGRATIONS)
    assert all(after[t] == 0 for t in set(after) - set(before) - {"schema_version"})

    # The migrated database has exactly the tables, columns and indexes of a new one.
    new_url = f"sqlite:///{tmp_path / 'new.db'}" if fresh_url.startswith("sqlite") else None
    if new_url:
        subprocess.run([str(BIN), "init-db"], env={**env, "DURABLE_DATABASE_URL": new_url}, check=True,
                       capture_output=True)
        assert schema_shape(fresh_url) == schema_shape(new_url)
    else:
        shape = schema_shape(fresh_url)
        from durable_ledger.store.migrations import current_models

        assert set(shape) == {m._meta.table_name for m in current_models()} | {"schema_version"}

    # The gate on the migrated data, with the current code.
    from durable_ledger.app import create_app
    from durable_ledger.auth import _cache

    _cache.clear()
    app = create_app(Config(database_url=fresh_url, bootstrap_tokens="", log_level="WARNING"))
    client = app.test_client()
    h = {"Authorization": f"Bearer {seen['runner']}"}
    assert client.get("/v1/jobs/m1", headers=h).status_code == 200  # the old token authenticates
    r = client.post("/v1/operations/begin", headers=h, json=seen["draft"]).get_json()
    assert (r["decision"], r["receipt"]["remote_id"]) == ("reuse_receipt", "101")
    assert r["receipt"]["link"] == "https://example.test/?p=101"
    r = client.post("/v1/operations/begin", headers=h, json=seen["seo"]).get_json()
    assert (r["decision"], r.get("reason")) == (seen["sent_answer"]["decision"], seen["sent_answer"].get("reason"))
    assert r["operation"]["state"] == "SENT"
    r = client.post("/v1/operations/begin", headers=h, json={
        "job_id": "m1", "action": "publish", "payload": seen["publish"], "fencing_token": seen["fencing_token"],
        "target": "wordpress:test:101"}).get_json()
    assert r["decision"] == "dispatch", r  # the approval granted before the upgrade still counts
    r = client.post("/v1/operations/begin", headers=h, json={
        "job_id": "m1", "action": "set_tags", "payload": {"tags": ["a"]},
        "fencing_token": seen["fencing_token"]}).get_json()
    assert r["decision"] == "dispatch"
    if not db.is_closed():
        db.close()


def test_newer_schema_is_refused(tmp_path):
    url = f"sqlite:///{tmp_path / 'newer.db'}"
    env = {**os.environ, "DURABLE_DATABASE_URL": url, "DURABLE_BOOTSTRAP_TOKENS": ""}
    subprocess.run([str(BIN), "init-db"], env=env, check=True, capture_output=True)
    init_database(url)
    from durable_ledger.store.migrations import SchemaVersion

    with db.connection_context():
        SchemaVersion.create(version=999, name="from_the_future", applied_at=0)
    db.close()
    r = subprocess.run([str(BIN), "init-db"], env=env, capture_output=True, text=True)
    assert r.returncode == 2 and "newer than this release" in r.stderr


def test_database_made_by_current_code_before_migrations_is_recognised(tmp_path):
    """A build between 0.1.0 and migrations: all tables present, no schema_version."""
    url = f"sqlite:///{tmp_path / 'mid.db'}"
    init_database(url)
    from durable_ledger.store.migrations import current_models

    with db.connection_context():
        db.create_tables(current_models())
    db.close()
    env = {**os.environ, "DURABLE_DATABASE_URL": url, "DURABLE_BOOTSTRAP_TOKENS": ""}
    out = json.loads(subprocess.run([str(BIN), "init-db"], env=env, check=True, capture_output=True,
                                    text=True).stdout)
    assert out["applied"] == EXPECTED_MIGRATIONS


def test_m0006_adds_field_digests_to_a_version_5_database(fresh_url):
    """A database at version 5 (operation without `field_digests`, one operation stored) gets the
    column from m0006 alone; the old row keeps its data and answers a mismatch without names."""
    from durable_ledger.store.migrations import Schema, SchemaVersion, migrate_schema
    from durable_ledger.store.models import Job, Operation

    init_database(fresh_url)
    migrate_schema()
    with db.connection_context():
        Schema(db.obj).drop_column("operation", "field_digests")
        SchemaVersion.delete().where(SchemaVersion.version >= 6).execute()
        job = Job.insert(tenant="acme", job_id="v3", created_at=0, updated_at=0).execute()
        db.execute_sql("INSERT INTO operation (tenant, operation_key, job_id, task_version, action, request_hash,"
                       " state, attempt, max_attempts, fencing_token, requires_approval, reconcile_attempts,"
                       " created_at, updated_at) VALUES ('acme', 'k', %s, 1, 'a', 'd', 'CONFIRMED', 1, 3, 1, %s,"
                       " 0, 0, 0)".replace("%s", "?" if fresh_url.startswith("sqlite") else "%s"), (job, False))
    out = migrate_schema()
    assert out["applied"] == ["0006_operation_field_digests", "0007_no_redundant_job_indexes", "0008_lease_liveness",
                              "0009_approval_policy"]
    with db.connection_context():
        op = Operation.get()
        assert (op.operation_key, op.request_hash, op.field_digests) == ("k", "d", None)
    db.close()


def test_m0007_drops_the_job_indexes_another_index_leads_with(fresh_url):
    """A version 6 database (with `operation(job_id)` and `operation_event(job_id)`) loses both;
    deleting a job still cascades to its operations and their events."""
    from durable_ledger.store.migrations import Schema, SchemaVersion, migrate_schema
    from durable_ledger.store.models import Job, Operation, OperationEvent

    init_database(fresh_url)
    migrate_schema()
    with db.connection_context():
        schema = Schema(db.obj)
        schema.add_index("operation", ["job_id"])
        schema.add_index("operation_event", ["job_id"])
        SchemaVersion.delete().where(SchemaVersion.version >= 7).execute()
        before = schema.indexes("operation") | schema.indexes("operation_event")
        job = Job.insert(tenant="acme", job_id="v6", created_at=0, updated_at=0).execute()
        op = Operation.insert(tenant="acme", operation_key="k", job=job, task_version=1, action="a",
                              request_hash="d", state="SENT", fencing_token=1, created_at=0, updated_at=0).execute()
        OperationEvent.insert(operation=op, job=job, to_state="SENT", actor="t", created_at=0).execute()
    assert {"operation_job_id", "operation_event_job_id"} <= before
    assert migrate_schema()["applied"] == ["0007_no_redundant_job_indexes", "0008_lease_liveness",
                              "0009_approval_policy"]
    with db.connection_context():
        after = schema.indexes("operation") | schema.indexes("operation_event")
        assert {"operation_job_id", "operation_event_job_id"} & after == set()
        assert {"operation_job_id_state", "operation_event_job_id_to_state"} <= after
        Job.delete().where(Job.id == job).execute()
        assert (Operation.select().count(), OperationEvent.select().count()) == (0, 0)
    db.close()


def test_m0008_adds_lease_liveness_to_a_version_7_database(fresh_url):
    """A version 7 database (lease without `live_until`) gets the column; a lease stored before
    has no liveness (None): a takeover that respects liveness takes it at once, as before."""
    from durable_ledger.store.migrations import Schema, SchemaVersion, migrate_schema
    from durable_ledger.store.models import Job, Lease

    init_database(fresh_url)
    migrate_schema()
    with db.connection_context():
        Schema(db.obj).drop_column("lease", "live_until")
        SchemaVersion.delete().where(SchemaVersion.version >= 8).execute()
        job = Job.insert(tenant="acme", job_id="v7", created_at=0, updated_at=0).execute()
        db.execute_sql("INSERT INTO lease (job_id, owner, fencing_token, expires_at, acquired_at) VALUES (%s, 'o', 3,"
                       " 9e9, 0)".replace("%s", "?" if fresh_url.startswith("sqlite") else "%s"), (job,))
    assert migrate_schema()["applied"] == ["0008_lease_liveness", "0009_approval_policy"]
    with db.connection_context():
        lease = Lease.get()
        assert (lease.owner, lease.fencing_token, lease.live_until) == ("o", 3, None)
    db.close()


def test_m0009_adds_approval_policies_to_a_version_8_database(fresh_url):
    """A version 8 database (no token groups, no operation policy, approvals without approver or
    door) gets the columns; rows stored before keep their meaning: a token without groups, an
    operation needing one approval by anyone, an approval whose approver is its approved_by."""
    from durable_ledger.approvals import policy
    from durable_ledger.store.migrations import Schema, SchemaVersion, migrate_schema
    from durable_ledger.store.models import ApiToken, Approval, ApprovalDenial, Job, Operation

    init_database(fresh_url)
    migrate_schema()
    with db.connection_context():
        schema = Schema(db.obj)
        for table, column in (("api_token", "groups"), ("operation", "approval_policy"), ("approval", "approver_name"),
                              ("approval", "approver_groups"), ("approval", "door"), ("approval_denial", "door")):
            schema.drop_column(table, column)
        SchemaVersion.delete().where(SchemaVersion.version >= 9).execute()
        job = Job.insert(tenant="acme", job_id="v8", created_at=0, updated_at=0).execute()
        q = "?" if fresh_url.startswith("sqlite") else "%s"
        db.execute_sql("INSERT INTO approval (tenant, job_id, task_version, action, content_digest, target, expires_at,"
                       f" approved_by, created_at) VALUES ('acme', {q}, 1, 'publish', 'd', '', 9e9, 'approver:ann', 0)",
                       (job,))
        db.execute_sql("INSERT INTO api_token (tenant, role, token_hash, name, created_at) VALUES"
                       " ('acme', 'approver', 'h', 'ann', 0)")
    assert migrate_schema()["applied"] == ["0009_approval_policy"]
    with db.connection_context():
        a = Approval.get()
        assert (a.approver_name, a.door, policy.approver_of(a)) == (None, None, ("ann", frozenset()))
        assert ApiToken.get().groups is None
        assert {"approval_policy"} <= Schema(db.obj).columns("operation")
        assert {"door"} <= Schema(db.obj).columns("approval_denial")
        assert Operation.select().count() == ApprovalDenial.select().count() == 0
    db.close()
