"""Which stored strings may become a link: only absolute http(s) URLs.

Receipts, evidence and candidates are what a caller (or a remote a reconciler asked) said; a
`javascript:` or `data:` URL in an href runs in the console's origin when clicked (the CSP stops
it in browsers that enforce it; it must not be there at all). Anything else is shown as text.
"""

from urllib.parse import urlsplit

MAX_URL = 2048


def http_url(value):
    """``value`` if it is an http:// or https:// URL with a host, else None."""
    if not isinstance(value, str) or not value or len(value) > MAX_URL:
        return None
    if any(c <= " " or c == "\x7f" or c == "\\" for c in value):  # browsers drop tabs/newlines inside a URL
        return None
    if not value[:8].lower().startswith(("http://", "https://")):
        return None
    try:
        parts = urlsplit(value)
    except ValueError:
        return None
    return value if parts.scheme.lower() in ("http", "https") and parts.hostname else None
