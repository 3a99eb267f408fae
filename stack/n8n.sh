#!/usr/bin/env bash
# n8n (2.40.7 by default; N8N_VERSION=1.123.81 for the 1.x leg of the version matrix) on Node 24,
# installed once per machine and version into the cache outside the repo ($CACHE/n8n-<version>),
# and helpers to run it headless with a private user folder. Node 24 suits both: n8n 2.x needs
# >= 24, n8n 1.123.x declares ">=20.19 <= 24.x".
#
#   bash stack/n8n.sh install                 # ensure the install; prints the n8n home dir
#   bash stack/n8n.sh path                    # prints PATH entries (node 24 bin) to prepend
#   bash stack/n8n.sh n8n <args...>           # run the n8n CLI with the headless environment
#   bash stack/n8n.sh import-credentials FILE
#   bash stack/n8n.sh import-workflow FILE
#   bash stack/n8n.sh execute WORKFLOW_ID     # prints the IRun JSON (--rawOutput)
#
# Environment for the run helpers: N8N_USER_FOLDER (required: a private directory per test),
# N8N_PORT / N8N_RUNNERS_BROKER_PORT (default: derived from a free port, so concurrent n8n
# processes do not collide), N8N_DB=sqlite|postgres, N8N_PG_DATABASE when N8N_DB=postgres.
#
# Database: SQLite by default. Measured here: the first CLI command in a fresh user folder (runs
# all migrations) takes 4.5 s on SQLite vs 6.0 s on the local PostgreSQL, later commands 2.7 s on
# both; SQLite needs no server, no database to create and drop per test, and each test's data dies
# with its private N8N_USER_FOLDER. The price is compiling sqlite3 once per install (~65 s, cached).
set -euo pipefail
N8N_VERSION="${N8N_VERSION:-2.40.7}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${DURABLE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/durable-steps}"
N8N_HOME="$CACHE/n8n-$N8N_VERSION"
NODE_BIN="$(bash "$HERE/node24.sh")"
export PATH="$NODE_BIN:$PATH"   # the task runner is spawned as plain `node`: Node 24 must come first

log() { echo "[n8n.sh] $*" >&2; }

progress() {   # print elapsed time and install size every 15 s while $1 (pid) lives
  local pid=$1 dir=$2 start=$SECONDS
  while kill -0 "$pid" 2>/dev/null; do
    sleep 15
    kill -0 "$pid" 2>/dev/null || break
    log "  ... $((SECONDS - start)) s, $(ls "$dir/node_modules" 2>/dev/null | wc -l) top-level packages so far"
  done
}

install_n8n() {
  if [[ -f "$N8N_HOME/.complete" ]]; then echo "$N8N_HOME"; return; fi
  mkdir -p "$CACHE"
  # One installer at a time per machine (parallel CI jobs share the cache).
  exec 9>"$CACHE/.n8n-$N8N_VERSION.lock"
  flock 9
  if [[ -f "$N8N_HOME/.complete" ]]; then echo "$N8N_HOME"; return; fi
  local t0=$SECONDS
  N8N_TMP="$(mktemp -d "$CACHE/.n8n-$N8N_VERSION.XXXXXX")"
  local tmp="$N8N_TMP"
  trap 'rm -rf "$N8N_TMP"' EXIT
  log "installing n8n@$N8N_VERSION into $N8N_HOME (about 4 min, 2.8 GB; --ignore-scripts because"
  log "@confluentinc/kafka-javascript's install script downloads from the internet)"
  if [[ "$N8N_VERSION" == 1.* ]]; then
    # n8n-nodes-base 1.x depends on xlsx as a tarball URL on cdn.sheetjs.com, which is not a
    # registry and not reachable here: take the registry's last xlsx release instead (only the
    # Spreadsheet File / Convert to File nodes use it).
    log "n8n 1.x: overriding xlsx (https://cdn.sheetjs.com/... tarball) with xlsx@0.18.5 from the registry"
    echo '{"private":true,"overrides":{"xlsx":"0.18.5"}}' >"$tmp/package.json"
  else
    echo '{"private":true}' >"$tmp/package.json"
  fi
  (cd "$tmp" && npm i --no-audit --no-fund --loglevel=error --ignore-scripts "n8n@$N8N_VERSION" >&2) &
  local pid=$!
  progress "$pid" "$tmp" &
  wait "$pid"
  log "npm install done in $((SECONDS - t0)) s; compiling sqlite3 for Node 24 (its prebuilt download is unreachable)"
  local t1=$SECONDS
  (cd "$tmp" && npm_config_nodedir="$(dirname "$NODE_BIN")" npm rebuild sqlite3 --loglevel=error >&2) &
  pid=$!
  progress "$pid" "$tmp" &
  wait "$pid"
  log "sqlite3 rebuilt in $((SECONDS - t1)) s"
  rm -rf "$N8N_HOME"
  mv "$tmp" "$N8N_HOME"
  trap - EXIT
  echo "$N8N_VERSION installed in $((SECONDS - t0)) s on $(date -u +%FT%TZ)" >"$N8N_HOME/.complete"
  log "n8n@$N8N_VERSION ready in $((SECONDS - t0)) s"
  echo "$N8N_HOME"
}

free_port() { node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }

run_n8n() {
  [[ -f "$N8N_HOME/.complete" ]] || install_n8n >/dev/null
  : "${N8N_USER_FOLDER:?set N8N_USER_FOLDER to a private directory}"
  export N8N_USER_FOLDER
  export N8N_ENCRYPTION_KEY="${N8N_ENCRYPTION_KEY:-durable-steps-test}"
  export N8N_DIAGNOSTICS_ENABLED=false N8N_VERSION_NOTIFICATIONS_ENABLED=false \
    N8N_TEMPLATES_ENABLED=false N8N_PERSONALIZATION_ENABLED=false \
    N8N_LOG_LEVEL="${N8N_LOG_LEVEL:-info}" N8N_SECURE_COOKIE=false
  # V8's code cache on disk: an n8n process (and its task runner) compiles about 1.4 s of CPU less
  # at start. Keyed by each file's content, so every n8n version can share it.
  export NODE_COMPILE_CACHE="${NODE_COMPILE_CACHE:-$CACHE/node-compile-cache}"
  export N8N_PORT="${N8N_PORT:-$(free_port)}"
  export N8N_RUNNERS_BROKER_PORT="${N8N_RUNNERS_BROKER_PORT:-$(free_port)}"
  if [[ "${N8N_DB:-sqlite}" == postgres ]]; then
    export DB_TYPE=postgresdb DB_POSTGRESDB_HOST="${DB_POSTGRESDB_HOST:-127.0.0.1}" \
      DB_POSTGRESDB_PORT="${DB_POSTGRESDB_PORT:-5432}" DB_POSTGRESDB_USER="${DB_POSTGRESDB_USER:-postgres}" \
      DB_POSTGRESDB_DATABASE="${N8N_PG_DATABASE:?set N8N_PG_DATABASE for N8N_DB=postgres}"
  fi
  exec "$N8N_HOME/node_modules/.bin/n8n" "$@"
}

cmd="${1:-install}"; shift || true
case "$cmd" in
  install) install_n8n ;;
  path) echo "$NODE_BIN" ;;
  n8n) run_n8n "$@" ;;
  import-credentials) run_n8n import:credentials --input="$1" ;;
  import-workflow) run_n8n import:workflow --input="$1" ;;
  execute) run_n8n execute --id="$1" --rawOutput ;;
  *) echo "usage: $0 install|path|n8n ARGS|import-credentials FILE|import-workflow FILE|execute ID" >&2; exit 2 ;;
esac
