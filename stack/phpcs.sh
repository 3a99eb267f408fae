#!/usr/bin/env bash
# PHP_CodeSniffer with the WordPress Coding Standards on the plugin, when both are installed.
# WPCS is distributed through Packagist (composer) only; neither Packagist nor GitHub is reachable
# from these machines and Debian does not package WPCS, so in CI this prints why it is skipped.
# The WordPress REST conventions that matter (permission_callback on every route, args with
# validate/sanitize callbacks, capability checks) are checked by tests/install/test_php_conventions.py.
# Run by hand here with Debian 12's php-codesniffer 3.7.1 and WPCS 2.3.0 (the last WPCS release for
# PHPCS < 3.9; `phpcs --config-set installed_paths <wpcs checkout>`): WordPress-Extra is clean, with
# WordPress.DB.PreparedSQL.InterpolatedNotPrepared disabled in durable-ops.php for the reason given
# there (table names are $wpdb->prefix + a constant; %i needs WordPress 6.2).
set -euo pipefail
cd "$(dirname "$0")/.."
PHPCS="${PHPCS:-$(command -v phpcs || true)}"
if [[ -z "$PHPCS" ]] || ! "$PHPCS" -i 2>/dev/null | grep -q WordPress; then
  echo "phpcs: skipped (PHP_CodeSniffer with the WordPress standard is not installed; WPCS comes only from Packagist)"
  exit 0
fi
exec "$PHPCS" -s --standard=WordPress-Extra --extensions=php ledger-service/durable_ledger/wordpress
