"""Integration tests against a real WordPress started by stack/wordpress.sh."""
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))
sys.path.insert(0, str(TESTS.parent / "ledger-service"))

from support import wordpress as _wp  # noqa: E402

# Session fixtures shared by every suite that needs a real WordPress.
wordpress_site = _wp.wordpress_site
wordpress_plain_site = _wp.wordpress_plain_site
