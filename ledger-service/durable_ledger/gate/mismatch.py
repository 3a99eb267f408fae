"""Which top-level fields of a payload changed since an operation key was first used.

A ``digest_mismatch`` that only says "another request" leaves the builder guessing which field
is volatile (in n8n: a fencing token, a lease expiry, an execution id that `{{ $json }}` carried
along). With the operation the ledger keeps one digest per top-level field of the first
payload; on a mismatch it compares them with the new payload's and names the fields that
differ, were added or were removed. Names only: no value and no digest leaves the ledger.

A per-field digest is a short sha256 of the field's canonical JSON. It answers "equal or not",
nothing else: it is never shown, and the summary (`summary.py`) is what people read.
"""

import hashlib

from ..kernel.digest import canonical_json
from ..kernel.errors import DigestMismatch

MAX_FIELDS = 100  # a wider payload gets no map: the answer then says only that it differs
_NAME_CHARS = 200  # a longer field name is not kept (it could only be matched, never shown)


def field_digests(payload):
    """{name: digest} for an object payload of at most `MAX_FIELDS` fields, else None."""
    if not isinstance(payload, dict) or len(payload) > MAX_FIELDS:
        return None
    return {k: hashlib.sha256(canonical_json(v)).hexdigest()[:16]
            for k, v in payload.items() if isinstance(k, str) and len(k) <= _NAME_CHARS}


def differing(stored, given):
    """{"changed", "added", "removed"}: sorted field names, or None when either side has no map
    (an operation stored before the map existed, a request sent as `request_hash` only)."""
    if not isinstance(stored, dict) or not isinstance(given, dict):
        return None
    return {"changed": sorted(k for k in stored.keys() & given.keys() if stored[k] != given[k]),
            "added": sorted(given.keys() - stored.keys()),
            "removed": sorted(stored.keys() - given.keys())}


def check_digest(op, digest, fields):
    """Raise `DigestMismatch` if ``digest`` is not the one ``op`` was first used with, naming the
    top-level fields that differ when both sides have a map."""
    if op.request_hash == digest:
        return
    diff = differing(getattr(op, "field_digests", None), fields)
    named = _named(diff)
    raise DigestMismatch(
        "this operation key was first used with another request"
        + (f" ({named})" if named else "")
        + "; keep volatile values (fencing tokens, lease, execution ids, timestamps) out of the payload, "
        "or use a new key (or a higher task version) for a different request",
        {"operation_key": op.operation_key, "stored": op.request_hash, "given": digest, "fields": diff},
    )


def _named(diff):
    if diff is None:
        return ""
    parts = [f"{label}: {', '.join(diff[k])}" for k, label in
             (("changed", "changed"), ("added", "added"), ("removed", "removed")) if diff[k]]
    return "top-level fields " + "; ".join(parts) if parts else "no top-level field it can name differs"
