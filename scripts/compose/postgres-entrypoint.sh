#!/bin/sh
# The official image's behaviour that docker-compose.yml relies on, nothing more.
set -eu
mkdir -p "$PGDATA" /var/run/postgresql
chown -R postgres:postgres "$PGDATA" /var/run/postgresql
chmod 700 "$PGDATA"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    pwfile=$(mktemp)
    printf '%s\n' "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD is required}" > "$pwfile"
    chown postgres "$pwfile"
    su postgres -s /bin/sh -c "initdb -D '$PGDATA' -U postgres --pwfile='$pwfile' --auth-host=scram-sha-256 --auth-local=trust" >/dev/null
    rm -f "$pwfile"
    echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
    if [ -n "${POSTGRES_DB:-}" ] && [ "$POSTGRES_DB" != postgres ]; then
        su postgres -s /bin/sh -c "postgres --single -D '$PGDATA' -j postgres" <<SQL >/dev/null
CREATE DATABASE "$POSTGRES_DB";
SQL
    fi
fi
if [ "${1:-}" = postgres ]; then
    shift
    exec su postgres -s /bin/sh -c 'exec postgres -D "$PGDATA" -c listen_addresses="*" "$@"' -- sh "$@"
fi
exec "$@"
