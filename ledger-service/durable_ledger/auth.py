"""Bearer tokens: stored as sha256 hashes, mapped to (tenant, role, sites).

Lookups are cached per process for ``ttl`` seconds because the gate is on every side effect's
hot path. The window this opens: a revoked token keeps working for at most ``ttl`` seconds in
a worker that cached it. Revocation through ``revoke_token`` also clears this process's cache,
and ends the console sessions the token signed in, at once in every worker (they are rows read on
every console request: store/console_sessions.py).
"""

import hashlib
import re
import secrets
import threading
import time
from dataclasses import dataclass

from .kernel.errors import Forbidden, Unauthorized, ValidationFailed
from .store import console_sessions, tokens

ROLES = ("runner", "editor", "approver", "admin")


@dataclass(frozen=True)
class Principal:
    tenant: str
    role: str
    name: str
    sites: frozenset | None = None  # None: every site profile
    groups: frozenset = frozenset()  # an approver's groups (approvals/policy.py)

    @property
    def actor(self):
        return f"{self.role}:{self.name}"

    def require(self, *roles):
        if self.role == "admin" or self.role in roles:
            return self
        raise Forbidden(
            f"role '{self.role}' may not do this; needs one of {', '.join(roles)}",
            {"role": self.role, "allowed": list(roles)},
        )

    def may_use_site(self, site):
        return self.sites is None or site in self.sites


def hash_token(raw):
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()


def _parse_sites(text):
    if not text or text.strip() in ("", "*"):
        return None
    return frozenset(s.strip() for s in text.replace("+", ",").split(",") if s.strip())


_NAME = re.compile(r"[A-Za-z0-9_.@-]{1,128}")


def _parse_groups(text):
    """``legal,editors`` or ``legal|editors`` -> the sorted names (each a name like a token's)."""
    groups = sorted({g.strip() for g in (text or "").replace("|", ",").split(",") if g.strip()})
    for g in groups:
        if not _NAME.fullmatch(g):
            raise ValidationFailed(f"group '{g}' is not 1-128 of A-Z a-z 0-9 _ . @ -", {"field": "groups"})
    return groups


def create_token(tenant, role, name=None, sites=None, raw=None, groups=None):
    """Store a token (hashed) and return the raw value; the raw value is never stored. ``name``
    is the actor an approval policy names; ``groups`` (names) the groups it may name."""
    if role not in ROLES:
        raise ValidationFailed(f"unknown role '{role}'", {"roles": list(ROLES)})
    groups = _parse_groups(",".join(groups) if isinstance(groups, (list, tuple, set, frozenset)) else groups)
    raw = raw or "dl_" + secrets.token_urlsafe(32)
    tokens.insert_token(
        tenant=tenant,
        role=role,
        name=name or f"{tenant}-{role}",
        sites=",".join(sorted(sites)) if sites else None,
        token_hash=hash_token(raw),
        created_at=time.time(),
        groups=",".join(groups) or None,
    )
    return raw


def load_bootstrap_tokens(spec):
    """``tenant:role:token[:site+site[:name[:group|group]]]``, comma separated (dev and tests).
    An empty or ``*`` sites field is every site: ``acme:approver:t1:*:alice:legal|editors``."""
    count = 0
    for entry in (e.strip() for e in (spec or "").split(",")):
        if not entry:
            continue
        parts = entry.split(":")
        if not 3 <= len(parts) <= 6 or not all(parts[:3]):
            raise ValueError("DURABLE_BOOTSTRAP_TOKENS entries look like tenant:role:token[:site+site[:name[:group|group]]]")
        tenant, role, raw = parts[:3]
        sites = _parse_sites(parts[3]) if len(parts) >= 4 else None
        name = parts[4] if len(parts) >= 5 and parts[4] else f"bootstrap-{tenant}-{role}"
        create_token(tenant, role, name=name, sites=sites, raw=raw, groups=parts[5] if len(parts) == 6 else None)
        count += 1
    return count


def revoke_token(raw=None, hash_prefix=None):
    """Revoke one token, by its value or by a prefix of its stored sha256 (at least 12 hex
    digits, as `token list` prints it; it must match one live token). Returns how many were
    revoked: 0 for an unknown or already revoked token. The one place a token is revoked.

    The console sessions it signed in end at once; this process's cache is cleared; other
    processes (serve's workers) stop accepting it for API calls when their cached entry expires,
    DURABLE_TOKEN_CACHE_TTL_S (30 s) at most."""
    if raw is not None:
        key = hash_token(raw)
    else:
        prefix = (hash_prefix or "").strip().lower()
        if not re.fullmatch(r"[0-9a-f]{12,64}", prefix):
            raise ValidationFailed("a token hash prefix is 12 to 64 hex digits", {"field": "hash"})
        live = tokens.live_token_hashes_with_prefix(prefix, limit=2)
        if len(live) > 1:
            raise ValidationFailed("the hash prefix matches more than one token; give more digits", {"field": "hash"})
        key = live[0] if live else prefix
    now = time.time()
    n = tokens.revoke_token_hash(key, now)
    console_sessions.end_for_token(key, now, "token_revoked")
    _cache.clear()
    return n


def list_tokens(tenant=None):
    """Every token's description, never its value: id, tenant, role, name, sites, the first 12
    hex digits of its hash (what `token revoke --hash` takes), created and revoked times."""
    return [{"id": t.id, "tenant": t.tenant, "role": t.role, "name": t.name, "sites": t.sites, "groups": t.groups,
             "hash": t.token_hash[:12], "created_at": t.created_at, "revoked_at": t.revoked_at}
            for t in tokens.token_rows(tenant)]


class _TokenCache:
    def __init__(self):
        self._lock = threading.Lock()
        self._items = {}

    def get(self, key, ttl):
        with self._lock:
            hit = self._items.get(key)
        if hit and time.monotonic() - hit[1] < ttl:
            return hit[0]
        return None

    def put(self, key, principal):
        with self._lock:
            if len(self._items) > 10000:
                self._items.clear()
            self._items[key] = (principal, time.monotonic())

    def clear(self):
        with self._lock:
            self._items.clear()


_cache = _TokenCache()


def authenticate(raw, ttl=30.0):
    """Principal for a raw bearer token, or raise Unauthorized."""
    if not raw:
        raise Unauthorized("missing bearer token: send 'Authorization: Bearer <token>'")
    return authenticate_hash(hash_token(raw), ttl)


def authenticate_hash(key, ttl=30.0):
    """Principal for a stored token hash (the review page's session keeps only the hash)."""
    if not key:
        raise Unauthorized("not signed in")
    principal = _cache.get(key, ttl)
    if principal is not None:
        return principal
    row = tokens.live_token(key)
    if row is None:
        raise Unauthorized("unknown or revoked token")
    principal = Principal(row.tenant, row.role, row.name or row.role, _parse_sites(row.sites),
                          frozenset((row.groups or "").split(",")) - {""})
    _cache.put(key, principal)
    return principal


def bearer_from_header(value):
    if not value:
        return None
    scheme, _, token = value.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()
