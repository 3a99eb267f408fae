"""Integration tests against a real WordPress started by stack/wordpress.sh."""
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]

from support import wordpress as _wp  # noqa: E402

# Session fixtures shared by every suite that needs a real WordPress.
wordpress_site = _wp.wordpress_site
wordpress_plain_site = _wp.wordpress_plain_site
