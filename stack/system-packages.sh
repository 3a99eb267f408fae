#!/usr/bin/env bash
# Every Debian package the suites, the demo and the benchmark need, installed in one step
# (`make deps`; `make test` runs it first). Only what is missing is installed; with everything
# there it costs one dpkg-query. The local services themselves are started by ensure-services.sh.
set -euo pipefail
PACKAGES=(
  chromium chromium-driver            # the console, the n8n editor and the newcomer suite in headless Chromium
  dovecot-imapd                       # the orders sample's mailbox (IMAP), read back by its lookups
  wordpress php-cli php-mysql mariadb-server  # a throwaway WordPress (stack/wordpress.py)
  wrk                                 # make bench's load generator
)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "[deps] installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
if [ ! -f /var/lib/apt/lists/.durable-updated ]; then
  apt-get update -qq && touch /var/lib/apt/lists/.durable-updated
fi
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
