#!/usr/bin/env bash
# Make sure the local PostgreSQL (and, when asked, MariaDB and Redis) answer; install and start
# them if they are missing. Used by make targets and .ci/run. Idempotent.
set -euo pipefail
want="${*:-postgres}"
log() { printf '[services] %s\n' "$*" >&2; }

apt_install() {
  if [ ! -f /var/lib/apt/lists/.durable-updated ]; then
    apt-get update -qq && touch /var/lib/apt/lists/.durable-updated
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

wait_for() { # name, command
  for _ in $(seq 1 60); do
    if eval "$2" >/dev/null 2>&1; then return 0; fi
    sleep 0.5
  done
  log "$1 did not come up"; return 1
}

ensure_postgres() {
  if pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; then return; fi
  if ! ls /etc/postgresql/*/main >/dev/null 2>&1; then
    log "installing PostgreSQL"
    apt_install postgresql
  fi
  local ver; ver=$(ls /etc/postgresql | sort -V | tail -1)
  log "starting PostgreSQL $ver"
  pg_ctlcluster --skip-systemctl-redirect "$ver" main start || true
  wait_for postgres "pg_isready -q -h 127.0.0.1 -p 5432"
  # Trust auth on loopback for the postgres role, as on the project's machines.
  psql -h 127.0.0.1 -U postgres -Atc 'select 1' >/dev/null 2>&1 || {
    local hba=/etc/postgresql/$ver/main/pg_hba.conf
    sed -i 's/^\(host\s\+all\s\+all\s\+127.0.0.1\/32\s\+\).*/\1trust/' "$hba"
    pg_ctlcluster --skip-systemctl-redirect "$ver" main reload
  }
}

ensure_mariadb() {
  if mysqladmin -h 127.0.0.1 -uroot status >/dev/null 2>&1; then return; fi
  command -v mariadbd >/dev/null || [ -x /usr/sbin/mariadbd ] || { log "installing MariaDB"; apt_install mariadb-server; }
  log "starting MariaDB"
  mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld 2>/dev/null || true
  start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd -- --user=mysql
  wait_for mariadb "mysqladmin -h 127.0.0.1 -uroot status"
}

ensure_redis() {
  if redis-cli -h 127.0.0.1 ping >/dev/null 2>&1; then return; fi
  command -v redis-server >/dev/null || { log "installing Redis"; apt_install redis-server; }
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no
  wait_for redis "redis-cli -h 127.0.0.1 ping"
}

for svc in $want; do
  case "$svc" in
    postgres) ensure_postgres ;;
    mariadb) ensure_mariadb ;;
    redis) ensure_redis ;;
    *) log "unknown service $svc"; exit 2 ;;
  esac
done
