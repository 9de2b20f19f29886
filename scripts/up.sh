#!/usr/bin/env bash
# `make up` / `make down`: the production-shaped stack on this machine, without Docker.
#   scripts/up.sh [start|stop|status]
# start: PostgreSQL database (created if missing) + migrations, gunicorn, WORKERS Celery workers and
# (SIM=1, default) the provider simulator with examples/providers.json loaded against it.
# Background processes write pid files and logs under var/up/. `make down` (= stop) stops them.
#
# Environment (defaults):
#   DATABASE_URL   postgres://postgres@127.0.0.1:5432/gateway
#   REDIS_URL      redis://127.0.0.1:6379/0
#   WORKERS        2      Celery worker processes (`celery -A gateway_site worker`)
#   WORKER_CONCURRENCY    pool children per worker (-c); unset: Celery's default (one per CPU)
#   WEB_WORKERS    2      gunicorn worker processes
#   WEB_PORT       8000   gunicorn port (127.0.0.1)
#   SIM            1      start the simulator (examples/sim.json) and load examples/providers.json
#   SIM_PORT       8900
#   DJANGO_SECRET_KEY     generated once into var/up/secret_key when not given
#   PROMETHEUS_MULTIPROC_DIR var/up/metrics  shared by web and workers, wiped at every start
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
PY="$ROOT/.venv/bin/python"
[ -x "$PY" ] || PY=python3
RUN="$ROOT/var/up"
mkdir -p "$RUN"

export DATABASE_URL=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/gateway}
export REDIS_URL=${REDIS_URL:-redis://127.0.0.1:6379/0}
export DJANGO_SETTINGS_MODULE=${DJANGO_SETTINGS_MODULE:-gateway_site.settings.production}
WORKERS=${WORKERS:-2}
WORKER_CONCURRENCY=${WORKER_CONCURRENCY:-}
WEB_WORKERS=${WEB_WORKERS:-2}
WEB_PORT=${WEB_PORT:-8000}
SIM=${SIM:-1}
SIM_PORT=${SIM_PORT:-8900}
export PROMETHEUS_MULTIPROC_DIR=${PROMETHEUS_MULTIPROC_DIR:-$RUN/metrics}

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

stop() {
  local f pid n=0
  for f in "$RUN"/*.pid; do
    [ -e "$f" ] || continue
    pid=$(cat "$f")
    if kill -0 "$pid" 2>/dev/null; then
      kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
      n=$((n + 1))
    fi
  done
  for _ in $(seq 1 60); do
    local any=0
    for f in "$RUN"/*.pid; do
      [ -e "$f" ] || continue
      alive "$f" && any=1
    done
    [ $any = 0 ] && break
    sleep 0.25
  done
  for f in "$RUN"/*.pid; do
    [ -e "$f" ] || continue
    if alive "$f"; then
      pid=$(cat "$f")
      echo "$(basename "$f" .pid) (pid $pid) did not stop in 15 s; killing it"
      kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$f"
  done
  echo "stopped $n process(es)"
}

status() {
  local f found=0
  for f in "$RUN"/*.pid; do
    [ -e "$f" ] || continue
    found=1
    if alive "$f"; then echo "$(basename "$f" .pid): running (pid $(cat "$f"))"
    else echo "$(basename "$f" .pid): NOT running (stale pid file)"; fi
  done
  [ $found = 1 ] || echo "nothing started by make up"
}

launch() {  # NAME CMD...  -> own session (process group) so stop can signal the whole group
  local name=$1
  shift
  setsid "$@" >"$RUN/$name.log" 2>&1 < /dev/null &
  echo $! >"$RUN/$name.pid"
}

wait_http() {  # URL SECONDS PIDFILE
  local url=$1 deadline=$((SECONDS + $2)) pidfile=$3
  until "$PY" -c "import httpx,sys; sys.exit(0 if httpx.get('$url', timeout=2).status_code == 200 else 1)" 2>/dev/null; do
    alive "$pidfile" || { echo "$(basename "$pidfile" .pid) exited; see ${pidfile%.pid}.log" >&2; return 1; }
    [ $SECONDS -lt $deadline ] || { echo "timed out waiting for $url" >&2; return 1; }
    sleep 0.3
  done
}

start() {
  for f in "$RUN"/*.pid; do
    if [ -e "$f" ] && alive "$f"; then
      echo "already running ($(basename "$f" .pid)); run 'make down' first" >&2
      status
      exit 1
    fi
    rm -f "$f"
  done
  if [ -z "${DJANGO_SECRET_KEY:-}" ]; then
    if [ ! -s "$RUN/secret_key" ]; then
      (umask 077 && "$PY" -c 'import secrets; print(secrets.token_urlsafe(50))' >"$RUN/secret_key")
    fi
    DJANGO_SECRET_KEY=$(cat "$RUN/secret_key")
    export DJANGO_SECRET_KEY
  fi

  case "$DATABASE_URL" in
    postgres://*|postgresql://*)
      "$PY" - "$DATABASE_URL" <<'EOF'
import sys
import psycopg
url = sys.argv[1]
base, name = url.split("?")[0].rsplit("/", 1)
with psycopg.connect(base + "/postgres", autocommit=True) as conn:
    if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
        conn.execute(f'CREATE DATABASE "{name}"')
        print(f"created database {name}")
EOF
      ;;
  esac
  echo "==> migrating $DATABASE_URL"
  "$PY" manage.py migrate --noinput >"$RUN/migrate.log"

  if [ "$SIM" = "1" ]; then
    echo "==> simulator (examples/sim.json) on http://127.0.0.1:$SIM_PORT"
    launch sim "$PY" -m sim --config examples/sim.json --port "$SIM_PORT"
    sed "s#127.0.0.1:8900/#127.0.0.1:$SIM_PORT/#g" examples/providers.json >"$RUN/providers.json"
    "$PY" manage.py load_providers "$RUN/providers.json"
    wait_http "http://127.0.0.1:$SIM_PORT/_sim/health" 30 "$RUN/sim.pid"
  fi

  # one multiprocess metrics directory per host, wiped before its processes start (docs/operations.md)
  rm -rf "$PROMETHEUS_MULTIPROC_DIR" && mkdir -p "$PROMETHEUS_MULTIPROC_DIR"
  echo "==> gunicorn ($WEB_WORKERS workers) on http://127.0.0.1:$WEB_PORT"
  launch web "$PY" -m gunicorn gateway_site.wsgi:application -b "127.0.0.1:$WEB_PORT" \
    -w "$WEB_WORKERS" --threads 4 --timeout 120 --access-logfile -
  # Celery's default prefork pool, as users start it; -c only when WORKER_CONCURRENCY is given
  local concurrency=()
  [ -n "$WORKER_CONCURRENCY" ] && concurrency=(-c "$WORKER_CONCURRENCY")
  echo "==> $WORKERS Celery worker(s), prefork pool, concurrency ${WORKER_CONCURRENCY:-one per CPU} each"
  for i in $(seq 1 "$WORKERS"); do
    launch "worker$i" "$PY" -m celery -A gateway_site worker --loglevel INFO "${concurrency[@]}" \
      -n "worker$i@%h"
  done
  wait_http "http://127.0.0.1:$WEB_PORT/healthz" 60 "$RUN/web.pid"
  sleep 1
  for i in $(seq 1 "$WORKERS"); do
    alive "$RUN/worker$i.pid" || { echo "worker$i exited; see $RUN/worker$i.log" >&2; stop; exit 1; }
  done

  cat <<EOF

Stack is up (logs and pid files in var/up/):
  API        http://127.0.0.1:$WEB_PORT/api/v1/batches   (docs: /api/docs/)
  admin      http://127.0.0.1:$WEB_PORT/admin/
  dashboard  http://127.0.0.1:$WEB_PORT/dashboard/
  metrics    http://127.0.0.1:$WEB_PORT/metrics   readiness: /readyz
$( [ "$SIM" = "1" ] && echo "  simulator  http://127.0.0.1:$SIM_PORT/_sim/counters" )
Same environment for management commands:
  export DATABASE_URL=$DATABASE_URL REDIS_URL=$REDIS_URL DJANGO_SETTINGS_MODULE=$DJANGO_SETTINGS_MODULE
$( [ -s "$RUN/secret_key" ] && [ "$DJANGO_SECRET_KEY" = "$(cat "$RUN/secret_key")" ] && echo '  export DJANGO_SECRET_KEY=$(cat var/up/secret_key)' )
  .venv/bin/python manage.py create_team demo && .venv/bin/python manage.py create_api_key --team demo
  .venv/bin/python manage.py createsuperuser
Stop everything: make down
EOF
}

case "${1:-start}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  *) echo "usage: $0 [start|stop|status]" >&2; exit 2 ;;
esac
