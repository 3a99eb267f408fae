"""Install tests from the release artifacts in dist/ (built by `make dist`); helpers in dist_support.py."""
from pathlib import Path

HERE = Path(__file__).resolve().parent

from support import wordpress as _wp  # noqa: E402

wordpress_site = _wp.wordpress_site
