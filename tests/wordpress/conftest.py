"""Integration tests against a real WordPress started by stack/wordpress.sh: `wordpress_site` and
`wordpress_plain_site` come from the test kit (tests/support/kit.py)."""
