#!/usr/bin/env bash
# PHP_CodeSniffer with the WordPress Coding Standards on the plugin, when both are installed.
# WPCS is distributed through Packagist (composer) only; neither Packagist nor GitHub is reachable
# from these machines and Debian does not package WPCS, so in CI this prints why it is skipped.
# The WordPress REST conventions that matter (permission_callback on every route, args with
# validate/sanitize callbacks, capability checks) are checked by tests/install/test_php_conventions.py.
set -euo pipefail
cd "$(dirname "$0")/.."
PHPCS="${PHPCS:-$(command -v phpcs || true)}"
if [[ -z "$PHPCS" ]] || ! "$PHPCS" -i 2>/dev/null | grep -q WordPress; then
  echo "phpcs: skipped (PHP_CodeSniffer with the WordPress standard is not installed; WPCS comes only from Packagist)"
  exit 0
fi
exec "$PHPCS" -s --standard=WordPress-Extra --extensions=php ledger-service/wordpress
