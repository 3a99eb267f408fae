"""The request summary stored with a step: what editors and approvers see of it, never the body."""

from ..kernel.secrets import redact

_KEEP = 12


def summary(payload):
    """A short, secret-free view of the request (titles, sizes), or None for a non-object."""
    if not isinstance(payload, dict):
        return None
    out = {}
    for k, v in payload.items():
        if isinstance(v, str):
            # Titles stay whole: degraded-mode reconciliation matches on them exactly.
            limit = 500 if k == "title" else 120
            out[k] = v if len(v) <= limit else v[:limit - 3] + "..."
        elif isinstance(v, (int, float, bool)) or v is None:
            out[k] = v
        else:
            out[k] = f"<{type(v).__name__} of {len(v)}>" if hasattr(v, "__len__") else type(v).__name__
        if len(out) >= _KEEP:
            break
    return redact(out)
