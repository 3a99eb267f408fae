"""Artifact rows (which tenant stored which digest) and environment snapshot manifests."""

from peewee import fn

from .agent_models import Artifact, EnvSnapshot
from .db import write_txn

# Artifacts


def artifact_bytes_of(tenant):
    """The total size of the tenant's distinct stored blobs (0 if none)."""
    return Artifact.select(fn.COALESCE(fn.SUM(Artifact.size), 0)).where(Artifact.tenant == tenant).scalar() or 0


def has_artifact(tenant, sha256):
    """True if the tenant stored this digest."""
    return Artifact.select().where(Artifact.tenant == tenant, Artifact.sha256 == sha256).exists()


def artifact_of(tenant, sha256):
    """The tenant's artifact row for this digest, or None."""
    return Artifact.get_or_none(Artifact.tenant == tenant, Artifact.sha256 == sha256)


def record_artifact(tenant, sha256, size, now):
    """Claim the tenant's row for this digest; an existing row is left as it is."""
    Artifact.insert(tenant=tenant, sha256=sha256, size=size, created_at=now).on_conflict_ignore().execute()


# Environment snapshots


def add_env_snapshot(tenant, job_pk, manifest_sha256, manifest, now):
    with write_txn():
        EnvSnapshot.create(tenant=tenant, job=job_pk, manifest_sha256=manifest_sha256, manifest=manifest,
                           created_at=now)


def latest_env_snapshot(tenant, job_pk, manifest_sha256=None):
    """The job's newest snapshot (with that manifest digest, if given), or None."""
    q = EnvSnapshot.select().where(EnvSnapshot.tenant == tenant, EnvSnapshot.job == job_pk)
    if manifest_sha256:
        q = q.where(EnvSnapshot.manifest_sha256 == manifest_sha256)
    return q.order_by(EnvSnapshot.id.desc()).first()
