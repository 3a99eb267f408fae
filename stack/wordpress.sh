#!/usr/bin/env bash
# Throwaway WordPress + MariaDB launcher (see stack/wordpress.py for the details).
#   stack/wordpress.sh up --state /tmp/wp/state.json [--port N] [--no-plugin]
#   stack/wordpress.sh down --state /tmp/wp/state.json
set -euo pipefail
exec python3 "$(dirname "${BASH_SOURCE[0]}")/wordpress.py" "$@"
