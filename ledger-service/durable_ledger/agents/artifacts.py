"""Content-addressed artifact store: files named by their sha256 under one directory.

``DURABLE_ARTIFACT_DIR`` (default ``<data dir>/artifacts``). A blob is written to a temporary
file in the same directory while it is hashed, then renamed into place, so a reader never sees
a half-written artifact and two writers of the same content converge on one file. Rows in the
ledger say which tenant stored which digest; reads are tenant-scoped.

Uploads over HTTP are bounded twice: one blob by ``max_bytes`` (counted while streaming, so a
chunked upload without Content-Length is cut off too) and a tenant's distinct blobs together by
``quota_bytes``. The quota is read before the upload and again before the rename; two uploads of
one tenant racing between those reads can both pass, so the quota can be exceeded by at most
(concurrent uploads - 1) x max_bytes. Content the tenant already stored costs nothing.
"""

import hashlib
import io
import os
import re
import tempfile
import time
from pathlib import Path

from ..kernel.config import default_data_dir
from ..kernel.errors import ArtifactNotFound, ArtifactQuotaExceeded, DigestMismatch, PayloadTooLarge, ValidationFailed
from ..store import artifacts as artifact_store

SHA_RE = re.compile(r"^[0-9a-f]{64}$")
CHUNK = 1 << 16


def artifact_dir(env=None):
    env = os.environ if env is None else env
    path = Path(env.get("DURABLE_ARTIFACT_DIR") or Path(env.get("DURABLE_DATA_DIR") or default_data_dir()) / "artifacts")
    path.mkdir(parents=True, exist_ok=True)
    return path


def blob_path(sha256, root=None):
    if not SHA_RE.match(sha256 or ""):
        raise ValidationFailed("sha256 must be 64 lowercase hex digits", {"field": "sha256"})
    return (root or artifact_dir()) / sha256[:2] / sha256


def tenant_usage(tenant):
    return artifact_store.artifact_bytes_of(tenant)


def _check_quota(tenant, sha, size, quota_bytes):
    if quota_bytes is None or (sha is not None and has_artifact(tenant, sha)):
        return
    used = tenant_usage(tenant)
    if used + size > quota_bytes:
        raise ArtifactQuotaExceeded(f"storing {size} more bytes would pass the tenant's artifact quota",
                                    {"quota_bytes": quota_bytes, "used_bytes": used, "size": size})


def _too_large(max_bytes):
    return PayloadTooLarge(f"the artifact is larger than {max_bytes} bytes", {"max_bytes": max_bytes})


def put_stream(tenant, stream, expected_sha256=None, root=None, max_bytes=None, quota_bytes=None, announced=None):
    """Store the bytes read from ``stream``. Returns (sha256, size, created).

    ``announced``: the Content-Length, if any, so an over-large or over-quota upload is refused
    before a byte is read."""
    root = root or artifact_dir()
    if announced is not None:
        if max_bytes is not None and announced > max_bytes:
            raise _too_large(max_bytes)
        if expected_sha256:  # otherwise only the bytes tell whether the tenant has them already
            _check_quota(tenant, expected_sha256, announced, quota_bytes)
    digest, size = hashlib.sha256(), 0
    fd, tmp = tempfile.mkstemp(dir=root, prefix=".incoming-")
    try:
        with os.fdopen(fd, "wb") as out:
            while True:
                chunk = stream.read(CHUNK)
                if not chunk:
                    break
                digest.update(chunk)
                size += len(chunk)
                if max_bytes is not None and size > max_bytes:
                    raise _too_large(max_bytes)
                out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
        sha = digest.hexdigest()
        if expected_sha256 and expected_sha256 != sha:
            raise DigestMismatch("the uploaded bytes do not match the announced sha256",
                                 {"announced": expected_sha256, "actual": sha})
        _check_quota(tenant, sha, size, quota_bytes)
        final = blob_path(sha, root)
        final.parent.mkdir(exist_ok=True)
        os.replace(tmp, final)
        tmp = None
    finally:
        if tmp and os.path.exists(tmp):
            os.unlink(tmp)
    # Only the 201/200 distinction depends on this read; the row itself is claimed by INSERT.
    existed = has_artifact(tenant, sha)
    artifact_store.record_artifact(tenant, sha, size, time.time())
    return sha, size, not existed


def put_bytes(tenant, data, root=None):
    return put_stream(tenant, io.BytesIO(data), root=root)


def has_artifact(tenant, sha256):
    return artifact_store.has_artifact(tenant, sha256)


def open_artifact(tenant, sha256, root=None):
    """Returns (path, size) after checking the tenant may read it and the file is intact on disk."""
    path = blob_path(sha256, root)
    row = artifact_store.artifact_of(tenant, sha256)
    if row is None or not path.exists():
        raise ArtifactNotFound(f"no artifact {sha256}", {"sha256": sha256})
    return path, row.size


def file_sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def verify_artifacts(tenant, expected, root=None):
    """``expected``: [{role, sha256}]. Returns (ok, problems): missing or corrupted blobs."""
    problems = []
    for art in expected:
        sha = art.get("sha256")
        try:
            path, _ = open_artifact(tenant, sha, root)
        except (ArtifactNotFound, ValidationFailed):
            problems.append({"role": art.get("role"), "sha256": sha, "problem": "missing"})
            continue
        if file_sha256(path) != sha:
            problems.append({"role": art.get("role"), "sha256": sha, "problem": "digest_mismatch"})
    return not problems, problems


def advance_evidence(tenant, expected, turns):
    """May the job's checkpoint advance past this session's work? ``turns``: sync.turn_summary.

    A completed turn is not business success: the checkpoint may advance only with evidence,
    every expected artifact in the store with its digest. Returns {verified, problems, may_advance}."""
    ok, problems = verify_artifacts(tenant, expected)
    last = turns[-1] if turns else None
    return {"verified": ok, "problems": problems, "may_advance": ok and bool(last) and last["status"] == "completed"}
