"""Install tests from the release artifacts in dist/ (built by `make dist`); helpers in dist_support.py."""
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from support import wordpress as _wp  # noqa: E402

wordpress_site = _wp.wordpress_site
