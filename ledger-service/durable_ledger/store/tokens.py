"""API tokens, stored as sha256 hashes (auth.py hashes, caches and maps them to principals)."""

from .models import ApiToken


def insert_token(tenant, role, name, sites, token_hash, created_at, groups=None):
    """Stores a token; a hash already stored is left as it is (returns nothing either way)."""
    ApiToken.insert(
        tenant=tenant,
        role=role,
        name=name,
        sites=sites,
        token_hash=token_hash,
        created_at=created_at,
        groups=groups,
    ).on_conflict_ignore().execute()


def live_token_hashes_with_prefix(prefix, limit=2):
    """The hashes of unrevoked tokens starting with ``prefix``, at most ``limit``."""
    return [t.token_hash for t in ApiToken.select(ApiToken.token_hash)
            .where(ApiToken.token_hash.startswith(prefix), ApiToken.revoked_at.is_null()).limit(limit)]


def revoke_token_hash(token_hash, now):
    """Marks the token revoked at ``now`` unless it already is; returns rows updated (0 or 1)."""
    return (
        ApiToken.update(revoked_at=now)
        .where(ApiToken.token_hash == token_hash, ApiToken.revoked_at.is_null())
        .execute()
    )


def token_rows(tenant=None):
    """Every token row (of ``tenant`` only, when given), oldest first."""
    query = ApiToken.select().order_by(ApiToken.id)
    if tenant:
        query = query.where(ApiToken.tenant == tenant)
    return list(query)


def live_token(token_hash):
    """The unrevoked token with this hash, or None."""
    return ApiToken.get_or_none(ApiToken.token_hash == token_hash, ApiToken.revoked_at.is_null())
