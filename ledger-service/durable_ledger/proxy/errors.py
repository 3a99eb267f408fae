"""Errors only the publishing proxy raises (rendered like every LedgerError)."""
from ..errors import LedgerError, NotFound


class SiteNotFound(NotFound):
    """No WordPress site profile with this name is configured."""

    code = "site_not_found"


class WordPressUnavailable(LedgerError):
    """WordPress could not be reached or answered a lookup with an error."""

    code, http_status = "wordpress_unavailable", 502


class MediaFetchFailed(LedgerError):
    """The media URL could not be fetched (or was too large)."""

    code, http_status = "media_fetch_failed", 422


class PostNotFound(NotFound):
    """WordPress has no post with this id (or the proxy's user may not see it)."""

    code = "post_not_found"


class ContentChanged(LedgerError):
    """The post's stored content no longer matches what was approved for publishing."""

    code, http_status = "content_changed", 409
