#!/bin/sh
# The official image's first start, in short: a cluster with POSTGRES_USER as
# its superuser (password auth over TCP) and POSTGRES_DB, then the server.
set -eu
PGDATA=/var/lib/postgresql/data
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  pwfile="$(mktemp)"
  printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
  initdb --pgdata="$PGDATA" --username="$POSTGRES_USER" --pwfile="$pwfile" \
    --auth-local=trust --auth-host=scram-sha-256 >/dev/null
  rm -f "$pwfile"
  echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
  pg_ctl --pgdata="$PGDATA" --options="-c listen_addresses=''" --wait start >/dev/null
  createdb --username="$POSTGRES_USER" "${POSTGRES_DB:-$POSTGRES_USER}"
  pg_ctl --pgdata="$PGDATA" --mode=fast --wait stop >/dev/null
fi
exec postgres -D "$PGDATA" -c listen_addresses='*'
