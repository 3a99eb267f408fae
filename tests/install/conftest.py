"""Install tests from the release artifacts in dist/ (built by `make dist`); helpers in dist_support.py.
The WordPress site (`wordpress_site`) comes from the test kit (tests/support/kit.py)."""
