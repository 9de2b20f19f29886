#!/usr/bin/env bash
# Make sure PostgreSQL and Redis answer on 127.0.0.1; start them where installed but stopped.
set -u
PGHOST=127.0.0.1 PGPORT=${TEST_PGPORT:-5432} REDISPORT=6379

pg_ok() { pg_isready -q -h "$PGHOST" -p "$PGPORT" 2>/dev/null || (exec 3<>/dev/tcp/$PGHOST/$PGPORT) 2>/dev/null; }
redis_ok() {
  if command -v redis-cli >/dev/null; then [ "$(redis-cli -h $PGHOST -p $REDISPORT ping 2>/dev/null)" = PONG ]
  else (exec 3<>/dev/tcp/$PGHOST/$REDISPORT) 2>/dev/null; fi
}
wait_for() { for _ in $(seq 1 30); do "$1" && return 0; sleep 0.5; done; return 1; }

if ! pg_ok; then
  if command -v pg_ctlcluster >/dev/null && [ -d /etc/postgresql ]; then
    echo "PostgreSQL is not answering; starting it"
    for v in $(ls /etc/postgresql); do pg_ctlcluster --skip-systemctl-redirect "$v" main start || true; done
  fi
  wait_for pg_ok || { echo "ERROR: PostgreSQL does not answer on $PGHOST:$PGPORT and could not be started" >&2; exit 1; }
fi
if ! redis_ok; then
  if command -v redis-server >/dev/null; then
    echo "Redis is not answering; starting it"
    mkdir -p /var/lib/redis /var/log/redis 2>/dev/null || true
    redis-server --daemonize yes --bind 127.0.0.1 -::1 --port $REDISPORT --save "" --appendonly no \
      --dir /var/lib/redis --logfile /var/log/redis/ci.log || true
  fi
  wait_for redis_ok || { echo "ERROR: Redis does not answer on $PGHOST:$REDISPORT and could not be started" >&2; exit 1; }
fi
# A default Debian install does not trust postgres@127.0.0.1 (scram-sha-256 on TCP, peer on the socket).
# Where the trusted login fails, provision a password role for the tests over the local socket (as the
# postgres system user) and tell the Makefile to use it (var/test-database-url).
mkdir -p var
rm -f var/test-database-url
if command -v psql >/dev/null && ! PGCONNECT_TIMEOUT=5 psql -w -h "$PGHOST" -p "$PGPORT" -U postgres -d postgres -Atqc 'select 1' >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v runuser >/dev/null; then
    echo "postgres@$PGHOST is not trusted here; using a password role 'gateway' for the tests"
    runuser -u postgres -- psql -h "${TEST_PGSOCKET:-/var/run/postgresql}" -p "$PGPORT" -v ON_ERROR_STOP=1 -Atqc "DO \$\$BEGIN
      IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'gateway') THEN
        CREATE ROLE gateway LOGIN CREATEDB PASSWORD 'gateway'; END IF; END\$\$;" \
      || { echo "ERROR: could not create the 'gateway' role over the local socket" >&2; exit 1; }
    runuser -u postgres -- psql -h "${TEST_PGSOCKET:-/var/run/postgresql}" -p "$PGPORT" -Atqc "SELECT 1 FROM pg_database WHERE datname = 'gateway'" | grep -q 1 \
      || runuser -u postgres -- createdb -h "${TEST_PGSOCKET:-/var/run/postgresql}" -p "$PGPORT" -O gateway gateway
    echo "postgres://gateway:gateway@$PGHOST:$PGPORT/gateway" > var/test-database-url
  else
    echo "ERROR: PostgreSQL answers but refuses postgres@$PGHOST without a password; set DATABASE_URL" >&2
    exit 1
  fi
fi
echo "PostgreSQL and Redis answer on $PGHOST"
