#!/usr/bin/env bash
# `make run`: the ledger on embedded SQLite with a fresh dev token, in the foreground.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="$ROOT/.venv/bin/durable-ledger"
export DURABLE_DATA_DIR="${DURABLE_DATA_DIR:-$ROOT/.data}"
export DURABLE_DATABASE_URL="${DURABLE_DATABASE_URL:-sqlite:///$DURABLE_DATA_DIR/durable-ledger.db}"
PORT="${DURABLE_PORT:-8787}"
mkdir -p "$DURABLE_DATA_DIR"
"$BIN" init-db >/dev/null
TOKEN_FILE="$DURABLE_DATA_DIR/dev-runner-token"
if [ ! -s "$TOKEN_FILE" ]; then
  (umask 077; "$BIN" token create --tenant dev --role runner --name dev-runner > "$TOKEN_FILE")
fi
TOKEN="$(cat "$TOKEN_FILE")"
cat <<MSG
Durable Steps ledger on SQLite ($DURABLE_DATABASE_URL)
  URL:        http://127.0.0.1:$PORT
  dev token:  $TOKEN   (tenant dev, role runner; stored in $TOKEN_FILE)

Try it:
  curl -s -X PUT http://127.0.0.1:$PORT/v1/jobs/demo-1 -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' -d '{"pipeline":"article"}'
  curl -s -X POST http://127.0.0.1:$PORT/v1/jobs/demo-1/lease -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' -d '{"owner":"me"}'
  curl -s -X POST http://127.0.0.1:$PORT/v1/operations/begin -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \\
       -d '{"job_id":"demo-1","action":"create_draft","payload":{"title":"Hello"},"fencing_token":1}'

Ctrl-C stops it.
MSG
exec "$BIN" serve --host 127.0.0.1 --port "$PORT" --workers "${DURABLE_WORKERS:-2}"
