"""Environment snapshot / restore: never trust a reused environment id to still have the files.

A snapshot stores every file of a directory in the artifact store and a manifest in the
ledger: files and digests, git commit and diff (when it is a repository), lock-file digests,
commands run, and test reports bound to the exact file digests they tested. Restore rebuilds
the directory elsewhere, verifies every digest, and marks a test report stale when a file it
tested has changed since (a report carried over from an earlier snapshot keeps its bindings).
"""

import os
import subprocess
import time
from pathlib import Path

from ..jobs.jobs import get_job
from ..kernel.digest import canonical_json, request_digest
from ..kernel.errors import NotFound, ValidationFailed
from ..store import artifacts as artifact_store
from .artifacts import blob_path, file_sha256, open_artifact, put_bytes, put_stream

LOCK_FILES = {"poetry.lock", "package-lock.json", "yarn.lock", "pnpm-lock.yaml", "uv.lock", "Pipfile.lock",
              "Cargo.lock", "go.sum", "composer.lock", "Gemfile.lock", "requirements.txt", "constraints.txt"}
SKIP_DIRS = {".git", "__pycache__", ".venv", "node_modules", ".pytest_cache"}


def _walk(root):
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        for name in sorted(filenames):
            full = Path(dirpath) / name
            if full.is_file() and not full.is_symlink():
                yield full.relative_to(root).as_posix(), full


def _git(root, tenant):
    if not (Path(root) / ".git").exists():
        return None

    def run(*args):
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, check=False)

    head = run("rev-parse", "HEAD")
    diff = run("diff", "HEAD", "--binary") if head.returncode == 0 else run("diff", "--binary")
    out = {"commit": head.stdout.decode().strip() if head.returncode == 0 else None,
           "dirty": bool(run("status", "--porcelain").stdout.strip())}
    if diff.stdout:
        out["diff_sha256"], _, _ = put_bytes(tenant, diff.stdout)
    return out


def _stale(report, files):
    changed = sorted(p for p, sha in report["tested_files"].items() if files.get(p) != sha)
    return {**report, "stale": bool(changed), "changed_files": changed}


def snapshot(tenant, job_id, directory, commands=(), test_reports=()):
    root = Path(directory).resolve()
    if not root.is_dir():
        raise ValidationFailed(f"{directory} is not a directory", {"field": "directory"})
    job = get_job(tenant, job_id)
    files = {}
    for rel, full in _walk(root):
        with open(full, "rb") as f:
            sha, size, _ = put_stream(tenant, f)
        files[rel] = {"sha256": sha, "size": size, "mode": full.stat().st_mode & 0o777}
    digests = {p: f["sha256"] for p, f in files.items()}
    report_paths = set()
    reports = []
    for path in test_reports:
        full = Path(path).resolve()
        rel = full.relative_to(root).as_posix() if full.is_relative_to(root) else None
        report_paths.add(rel)
        if rel is None:
            with open(full, "rb") as f:
                sha = put_stream(tenant, f)[0]
        else:
            sha = digests.get(rel)
        reports.append({"path": rel or full.name, "sha256": sha, "recorded_at": time.time(),
                        "tested_files": {p: s for p, s in digests.items() if p not in report_paths}})
    previous = latest(tenant, job.id)
    if previous is not None:  # carry earlier reports: their bindings say what they really tested
        seen = {r["path"] for r in reports}
        reports += [r for r in previous.manifest.get("test_reports", []) if r["path"] not in seen]
    manifest = {
        "version": 1, "job_id": job_id, "created_at": time.time(), "files": files,
        "git": _git(root, tenant),
        "lock_files": {p: s for p, s in digests.items() if Path(p).name in LOCK_FILES},
        "commands": list(commands),
        "test_reports": [_stale({k: v for k, v in r.items() if k not in ("stale", "changed_files")}, digests)
                         for r in reports],
    }
    manifest_sha = request_digest(manifest)
    put_bytes(tenant, canonical_json(manifest))
    artifact_store.add_env_snapshot(tenant, job.id, manifest_sha, manifest, time.time())
    return {"manifest_sha256": manifest_sha, **manifest}


def latest(tenant, job_pk, manifest_sha256=None):
    return artifact_store.latest_env_snapshot(tenant, job_pk, manifest_sha256)


def restore(tenant, job_id, directory, manifest_sha256=None):
    """Rebuild ``directory`` from the job's snapshot; every written file's digest is verified."""
    job = get_job(tenant, job_id)
    snap = latest(tenant, job.id, manifest_sha256)
    if snap is None:
        raise NotFound(f"job '{job_id}' has no environment snapshot", {"job_id": job_id})
    manifest = snap.manifest
    if request_digest(manifest) != snap.manifest_sha256:
        raise ValidationFailed("the stored manifest does not match its digest", {"manifest": snap.manifest_sha256})
    missing = []
    for rel, meta in manifest["files"].items():
        try:
            open_artifact(tenant, meta["sha256"])
        except NotFound:
            missing.append(rel)
    if missing:
        raise ValidationFailed("the artifact store lacks files of this snapshot", {"missing": missing})
    root = Path(directory).resolve()
    root.mkdir(parents=True, exist_ok=True)
    actual, mismatched = {}, []
    for rel, meta in manifest["files"].items():
        target = root / rel
        if not target.resolve().is_relative_to(root):
            raise ValidationFailed(f"manifest path escapes the directory: {rel}", {"path": rel})
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(target.name + ".restoring")
        with open(blob_path(meta["sha256"]), "rb") as src, open(tmp, "wb") as dst:
            while chunk := src.read(1 << 16):
                dst.write(chunk)
        os.chmod(tmp, meta.get("mode", 0o644))
        os.replace(tmp, target)
        actual[rel] = file_sha256(target)
        if actual[rel] != meta["sha256"]:
            mismatched.append(rel)
    if mismatched:
        raise ValidationFailed("restored files do not match the manifest", {"mismatched": mismatched})
    return {
        "manifest_sha256": snap.manifest_sha256, "directory": str(root), "files": len(actual), "verified": True,
        "git": manifest.get("git"), "lock_files": manifest.get("lock_files"), "commands": manifest.get("commands"),
        "test_reports": [_stale(r, actual) for r in manifest.get("test_reports", [])],
    }
