#!/usr/bin/env bash
# The upstream postgres image's first-start contract, for the parts docker-compose.yml uses.
set -euo pipefail

if [ "$(id -u)" = 0 ]; then
  chown postgres:postgres "$PGDATA" && chmod 700 "$PGDATA"
  exec setpriv --reuid postgres --regid postgres --init-groups "$0" "$@"
fi

# <NAME>_FILE: the value read from that file (a Docker secret), as upstream's file_env does;
# both set is an error.
file_env() {
  local name="$1" file="${1}_FILE"
  if [ -n "${!name:-}" ] && [ -n "${!file:-}" ]; then
    echo "$name and $file are exclusive" >&2
    exit 1
  fi
  if [ -n "${!file:-}" ]; then
    export "$name"="$(<"${!file}")"
    unset "$file"
  fi
}
file_env POSTGRES_USER
file_env POSTGRES_PASSWORD
file_env POSTGRES_DB
: "${POSTGRES_USER:=postgres}" "${POSTGRES_DB:=$POSTGRES_USER}"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  [ -n "${POSTGRES_PASSWORD:-}" ] || { echo "POSTGRES_PASSWORD is required" >&2; exit 1; }
  initdb --username="$POSTGRES_USER" --pwfile=<(printf '%s\n' "$POSTGRES_PASSWORD") \
    --auth-local=trust --auth-host=scram-sha-256 -D "$PGDATA" >/dev/null
  echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
  # The first start's server listens on the socket only, as upstream's does.
  pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start >/dev/null
  psql=(psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --no-password --dbname postgres -q)
  if [ "$POSTGRES_DB" != postgres ]; then
    "${psql[@]}" -c "CREATE DATABASE \"$POSTGRES_DB\""
  fi
  for f in /docker-entrypoint-initdb.d/*; do
    case "$f" in
      *.sql) echo "init: $f"; "${psql[@]}" --dbname "$POSTGRES_DB" -f "$f" ;;
      *.sh) echo "init: $f"; . "$f" ;;
    esac
  done
  pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
fi
if [ "${1:-}" = postgres ]; then
  exec "$@" -c listen_addresses='*'
fi
exec "$@"
