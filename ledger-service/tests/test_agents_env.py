"""Artifact store and environment snapshot / restore."""

import hashlib
import subprocess

import pytest
from agents_standin import clear_agent_tables
from conftest import auth

from durable_ledger.agents.artifacts import blob_path
from durable_ledger.cli import main as cli_main
from durable_ledger.store.db import db
from durable_ledger.kernel.errors import ValidationFailed


@pytest.fixture
def store(monkeypatch, database, tmp_path):
    monkeypatch.setenv("DURABLE_ARTIFACT_DIR", str(tmp_path / "artifacts"))
    monkeypatch.setenv("DURABLE_DATABASE_URL", database)
    clear_agent_tables()
    return tmp_path / "artifacts"


def test_artifact_put_get_is_content_addressed_and_tenant_scoped(client, store):
    data = b"hero image bytes" * 100
    sha = hashlib.sha256(data).hexdigest()
    r = client.put("/v1/artifacts", data=data, headers=auth())
    assert r.status_code == 201 and r.get_json()["sha256"] == sha and r.get_json()["size"] == len(data)
    assert client.put("/v1/artifacts", data=data, headers=auth()).status_code == 200
    assert (store / sha[:2] / sha).read_bytes() == data
    r = client.get(f"/v1/artifacts/{sha}", headers=auth())
    assert r.status_code == 200 and r.data == data
    r.close()
    assert client.get(f"/v1/artifacts/{sha}", headers=auth("other-token")).status_code == 404
    r = client.put("/v1/artifacts", data=b"x", headers={**auth(), "X-Content-SHA256": sha})
    assert r.status_code == 422 and r.get_json()["error"]["code"] == "digest_mismatch"
    assert client.get("/v1/artifacts/nothex", headers=auth()).status_code == 422


def test_sync_expected_artifact_missing_does_not_allow_advance(client, store):
    from durable_ledger.agents.artifacts import verify_artifacts

    with db.connection_context():
        ok, problems = verify_artifacts("acme", [{"role": "body", "sha256": "0" * 64}])
    assert ok is False and problems[0]["problem"] == "missing"


def _git(cwd, *args):
    subprocess.run(["git", "-C", str(cwd), "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
                   check=True, capture_output=True)


def test_env_snapshot_restore_verifies_and_marks_stale_reports(client, store, tmp_path, capsys):
    client.put("/v1/jobs/j1", json={}, headers=auth())
    work = tmp_path / "work"
    (work / "src").mkdir(parents=True)
    (work / "src" / "app.py").write_text("print('v1')\n")
    (work / "poetry.lock").write_text("lock v1\n")
    (work / "report.xml").write_text("<testsuite tests='3' failures='0'/>")
    _git(work, "init", "-q")
    _git(work, "add", "-A")
    _git(work, "commit", "-qm", "init")
    args = ["env", "snapshot", str(work), "--job", "j1", "--tenant", "acme", "--command", "pytest -q",
            "--test-report", str(work / "report.xml")]
    assert cli_main(args) == 0
    first = capsys.readouterr().out
    assert '"stale": false' in first and '"poetry.lock"' in first

    (work / "src" / "app.py").write_text("print('v2')\n")  # changed after the tests ran
    assert cli_main(["env", "snapshot", str(work), "--job", "j1", "--tenant", "acme"]) == 0
    capsys.readouterr()

    target = tmp_path / "elsewhere"
    assert cli_main(["env", "restore", str(target), "--job", "j1", "--tenant", "acme"]) == 0
    import json

    out = json.loads(capsys.readouterr().out)
    assert out["verified"] is True and out["files"] == 3
    assert (target / "src" / "app.py").read_text() == "print('v2')\n"
    assert out["git"]["commit"] and out["git"]["dirty"] is True and out["git"]["diff_sha256"]
    assert out["lock_files"] == {"poetry.lock": hashlib.sha256(b"lock v1\n").hexdigest()}
    [report] = out["test_reports"]
    assert report["stale"] is True and report["changed_files"] == ["src/app.py"]

    # A corrupted blob in the store is caught on restore.
    sha = hashlib.sha256(b"print('v2')\n").hexdigest()
    blob_path(sha, store).write_bytes(b"tampered")
    from durable_ledger.agents.envsnap import restore

    with db.connection_context(), pytest.raises(ValidationFailed) as exc:
        restore("acme", "j1", tmp_path / "again")
    assert exc.value.details == {"mismatched": ["src/app.py"]}
