#!/usr/bin/env bash
# `make up` / `make down`: the production-shaped stack on this machine, without Docker.
#   scripts/up.sh [start|stop|status|env]   (env: the export lines for management commands)
# start: PostgreSQL database (created if missing) + migrations, gunicorn (gateway_site.asgi, gunicorn.conf.py), WORKERS Celery workers and
# (SIM=1, default) the provider simulator with examples/providers.json loaded against it.
# Background processes write pid files and logs under UP_DIR (var/up/). `make down` (= stop) sends
# SIGTERM to each process group and waits GATEWAY_SHUTDOWN_SECONDS + 15 s (the workers' warm shutdown
# lets calls in flight answer for at most GATEWAY_SHUTDOWN_SECONDS; docs/engine.md) before SIGKILL.
#
# Environment (defaults):
#   DATABASE_URL   postgres://postgres@127.0.0.1:5432/gateway
#   REDIS_URL      redis://127.0.0.1:6379/0
#   WORKERS        2      Celery worker processes (`celery -A gateway_site worker`)
#   WORKER_CONCURRENCY    pool children per worker (-c); unset: Celery's default (one per CPU)
#   GATEWAY_DISPATCHERS   WORKERS x children  dispatcher slices cluster-wide (web and workers agree)
#   WEB_WORKERS    2      web worker processes (gunicorn, uvicorn worker: the async interactive lane + 4 threads for the site)
#   WEB_PORT       8000   web port (127.0.0.1): /v1/chat/completions and everything else
#   SIM            1      start the simulator (examples/sim-kinds.json) and load examples/providers.json
#   SIM_PORT       8900
#   UP_DIR         var/up pid files, logs, secret_key, metrics/ (another directory: a second stack)
#   GATEWAY_SHUTDOWN_SECONDS 30  the workers' warm-shutdown bound; stop waits 15 s longer
#   DJANGO_SECRET_KEY     generated once into UP_DIR/secret_key when not given
#   GATEWAY_METRICS_TOKEN generated once into UP_DIR/metrics_token when not given (/metrics needs it)
#   GATEWAY_SECRET_KEYS   generated once into UP_DIR/secret_keys when not given (provider keys at rest)
#   PROMETHEUS_MULTIPROC_DIR UP_DIR/metrics  shared by web and workers, created first, wiped at every start
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
PY="$ROOT/.venv/bin/python"
[ -x "$PY" ] || PY=python3
RUN=${UP_DIR:-$ROOT/var/up}
case "$RUN" in /*) ;; *) RUN="$ROOT/$RUN" ;; esac
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
# one dispatcher slice per pool child at most: size the cluster-wide dispatcher count to the children this
# stack starts (web and workers must agree; Celery's default concurrency is os.cpu_count())
CHILDREN=${WORKER_CONCURRENCY:-$("$PY" -c 'import os; print(os.cpu_count() or 1)')}
export GATEWAY_DISPATCHERS=${GATEWAY_DISPATCHERS:-$((WORKERS * CHILDREN))}
export PROMETHEUS_MULTIPROC_DIR=${PROMETHEUS_MULTIPROC_DIR:-$RUN/metrics}
# every Python process below (migrate and load_providers too) writes metric files there: it must exist
# before the first one starts (an explicit directory is never created by the app)
mkdir -p "$PROMETHEUS_MULTIPROC_DIR"
# stop: SIGTERM, then SIGKILL only after the workers' warm-shutdown bound plus a margin
SHUTDOWN_SECONDS=${GATEWAY_SHUTDOWN_SECONDS:-30}
STOP_GRACE=$(awk -v s="$SHUTDOWN_SECONDS" 'BEGIN { if (s !~ /^[0-9]+([.][0-9]+)?$/) exit 1;
  g = int(s); if (g < s) g++; print g + 15 }') \
  || { echo "GATEWAY_SHUTDOWN_SECONDS=$SHUTDOWN_SECONDS is not a number of seconds" >&2; exit 2; }

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

group_alive() {  # a process (not a zombie: it holds nothing) left in the process group led by pid $1
  kill -0 -- "-$1" 2>/dev/null || return 1
  command -v ps >/dev/null || return 0
  ps -A -o pgid=,stat= | awk -v g="$1" '$1 == g && $2 !~ /^Z/ { found = 1 } END { exit !found }'
}

running() {  # pid $1, or a process of its group, is still there (zombies do not count)
  group_alive "$1" && return 0
  kill -0 "$1" 2>/dev/null || return 1
  command -v ps >/dev/null || return 0
  case "$(ps -o stat= -p "$1" 2>/dev/null)" in Z* | "") return 1 ;; esac
}

stop() {
  local f pid n=0 t0=$SECONDS
  for f in "$RUN"/*.pid; do
    [ -e "$f" ] || continue
    pid=$(cat "$f")
    if running "$pid"; then
      kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
      n=$((n + 1))
    fi
  done
  [ $n = 0 ] || echo "sent SIGTERM to $n process group(s); waiting up to $STOP_GRACE s (warm shutdown: \
GATEWAY_SHUTDOWN_SECONDS=$SHUTDOWN_SECONDS + 15)"
  local deadline=$((SECONDS + STOP_GRACE))
  while [ $SECONDS -lt $deadline ]; do
    local any=0
    for f in "$RUN"/*.pid; do
      [ -e "$f" ] || continue
      pid=$(cat "$f")
      running "$pid" && any=1
    done
    [ $any = 0 ] && break
    sleep 0.25
  done
  for f in "$RUN"/*.pid; do
    [ -e "$f" ] || continue
    pid=$(cat "$f")
    if running "$pid"; then
      echo "$(basename "$f" .pid) (pid $pid) did not stop in $STOP_GRACE s; killing it"
      kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$f"
  done
  echo "stopped $n process(es) in $((SECONDS - t0)) s"
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

fail() {  # MESSAGE: stop what this start launched, exit 1 with one sentence
  echo "make up failed: $1" >&2
  stop >/dev/null 2>&1 || true
  exit 1
}

wait_ready() {  # URL SECONDS: /readyz 200 (database, migrations, Redis, a worker heartbeat)
  local url=$1 deadline=$((SECONDS + $2)) f
  until "$PY" -c "import httpx,sys; sys.exit(0 if httpx.get('$url', timeout=3).status_code == 200 else 1)" 2>/dev/null; do
    for f in "$RUN"/web.pid "$RUN"/worker*.pid; do
      alive "$f" || fail "$(basename "$f" .pid) exited; see ${f%.pid}.log"
    done
    if [ $SECONDS -ge $deadline ]; then
      "$PY" -c "import httpx; r = httpx.get('$url', timeout=3); print(r.status_code, r.text[:2000])" >&2 || true
      fail "$url did not answer 200 within $2 s (the failing check is above)"
    fi
    sleep 0.3
  done
}

command_env() {  # the export lines a management command needs to see this stack's settings
  local token_file="" key_file="" keys_file="" name value
  [ -s "$RUN/metrics_token" ] && [ "${GATEWAY_METRICS_TOKEN:-}" = "$(cat "$RUN/metrics_token")" ] && token_file=1
  [ -s "$RUN/secret_key" ] && [ "${DJANGO_SECRET_KEY:-}" = "$(cat "$RUN/secret_key")" ] && key_file=1
  [ -s "$RUN/secret_keys" ] && [ "${GATEWAY_SECRET_KEYS:-}" = "$(cat "$RUN/secret_keys")" ] && keys_file=1
  echo "  export DATABASE_URL=$DATABASE_URL REDIS_URL=$REDIS_URL"
  echo "  export DJANGO_SETTINGS_MODULE=$DJANGO_SETTINGS_MODULE GATEWAY_DISPATCHERS=$GATEWAY_DISPATCHERS"
  echo "  export PROMETHEUS_MULTIPROC_DIR=$PROMETHEUS_MULTIPROC_DIR"
  [ -n "$token_file" ] && echo "  export GATEWAY_METRICS_TOKEN=\$(cat ${RUN#"$ROOT"/}/metrics_token)"
  [ -n "$key_file" ] && echo "  export DJANGO_SECRET_KEY=\$(cat ${RUN#"$ROOT"/}/secret_key)"
  [ -n "$keys_file" ] && echo "  export GATEWAY_SECRET_KEYS=\$(cat ${RUN#"$ROOT"/}/secret_keys)"
  # every other setting this stack was started with (the defaults need no line): the same values, so a
  # command sees what the web server and the workers see; secrets by name only
  for name in $(compgen -e | grep -E '^(GATEWAY_|DJANGO_|CELERY_|DATABASE_|OTEL_)' | sort); do
    case "$name" in
      DATABASE_URL | REDIS_URL | DJANGO_SETTINGS_MODULE | GATEWAY_DISPATCHERS) continue ;;
      GATEWAY_METRICS_TOKEN) [ -n "$token_file" ] && continue ;;
      DJANGO_SECRET_KEY) [ -n "$key_file" ] && continue ;;
      GATEWAY_SECRET_KEYS) [ -n "$keys_file" ] && continue ;;
    esac
    case "$name" in
      *SECRET* | *TOKEN* | *PASSWORD* | *_KEY) echo "  # $name is set (a secret, not shown): export it too" ;;
      *) value=${!name}; printf "  export %s='%s'\n" "$name" "${value//\'/\'\\\'\'}" ;;
    esac
  done
}

env_only() {  # scripts/up.sh env: the block above, for a stack already started with this environment
  [ -n "${DJANGO_SECRET_KEY:-}" ] || { [ -s "$RUN/secret_key" ] && DJANGO_SECRET_KEY=$(cat "$RUN/secret_key") && export DJANGO_SECRET_KEY; } || true
  [ -n "${GATEWAY_METRICS_TOKEN:-}" ] || { [ -s "$RUN/metrics_token" ] && GATEWAY_METRICS_TOKEN=$(cat "$RUN/metrics_token") && export GATEWAY_METRICS_TOKEN; } || true
  [ -n "${GATEWAY_SECRET_KEYS:-}" ] || { [ -s "$RUN/secret_keys" ] && GATEWAY_SECRET_KEYS=$(cat "$RUN/secret_keys") && export GATEWAY_SECRET_KEYS; } || true
  command_env
}

start() {
  for f in "$RUN"/*.pid; do
    if [ -e "$f" ] && running "$(cat "$f")"; then
      echo "already running ($(basename "$f" .pid)); run 'make down' first" >&2
      status
      exit 1
    fi
    rm -f "$f"
  done
  if [ -z "${DJANGO_SECRET_KEY:-}" ]; then
    if [ ! -s "$RUN/secret_key" ]; then
      (umask 077 && "$PY" -c 'import secrets, sys; sys.stdout.write(secrets.token_urlsafe(50))' >"$RUN/secret_key")
    fi
    DJANGO_SECRET_KEY=$(cat "$RUN/secret_key")
    export DJANGO_SECRET_KEY
  fi
  if [ -z "${GATEWAY_METRICS_TOKEN:-}" ]; then  # /metrics carries team names and costs: never open
    if [ ! -s "$RUN/metrics_token" ]; then
      (umask 077 && "$PY" -c 'import secrets, sys; sys.stdout.write(secrets.token_urlsafe(32))' >"$RUN/metrics_token")
    fi
    GATEWAY_METRICS_TOKEN=$(cat "$RUN/metrics_token")
    export GATEWAY_METRICS_TOKEN
  fi
  if [ -z "${GATEWAY_SECRET_KEYS:-}" ]; then  # the Fernet key provider keys are stored encrypted with
    if [ ! -s "$RUN/secret_keys" ]; then
      (umask 077 && "$PY" -c 'import base64, secrets, sys; sys.stdout.write(base64.urlsafe_b64encode(secrets.token_bytes(32)).decode())' >"$RUN/secret_keys")
    fi
    GATEWAY_SECRET_KEYS=$(cat "$RUN/secret_keys")
    export GATEWAY_SECRET_KEYS
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
  # one multiprocess metrics directory per host, wiped while none of its processes runs (checked above)
  # and before any of them starts (docs/operations.md)
  rm -rf "$PROMETHEUS_MULTIPROC_DIR" && mkdir -p "$PROMETHEUS_MULTIPROC_DIR"
  echo "==> migrating $DATABASE_URL"
  "$PY" manage.py migrate --noinput >"$RUN/migrate.log" 2>&1 \
    || { tail -n 20 "$RUN/migrate.log" >&2; fail "migrate failed; see $RUN/migrate.log"; }

  if [ "$SIM" = "1" ]; then
    echo "==> simulator (examples/sim-kinds.json) on http://127.0.0.1:$SIM_PORT"
    launch sim "$PY" -m sim --config examples/sim-kinds.json --port "$SIM_PORT"
    sed "s#127.0.0.1:8900/#127.0.0.1:$SIM_PORT/#g" examples/providers.json >"$RUN/providers.json"
    "$PY" manage.py load_providers "$RUN/providers.json" || fail "load_providers $RUN/providers.json failed"
    wait_http "http://127.0.0.1:$SIM_PORT/_sim/health" 30 "$RUN/sim.pid" || fail "the simulator did not start"
  fi

  echo "==> gunicorn ($WEB_WORKERS uvicorn workers: the interactive lane and the site, gateway_site.asgi) on http://127.0.0.1:$WEB_PORT"
  launch web "$PY" -m gunicorn gateway_site.asgi:application --bind "127.0.0.1:$WEB_PORT" --workers "$WEB_WORKERS" --access-logfile -
  # Celery's default prefork pool, as users start it; -c only when WORKER_CONCURRENCY is given
  local concurrency=()
  [ -n "$WORKER_CONCURRENCY" ] && concurrency=(-c "$WORKER_CONCURRENCY")
  echo "==> $WORKERS Celery worker(s), prefork pool, concurrency ${WORKER_CONCURRENCY:-one per CPU} each," \
    "GATEWAY_DISPATCHERS=$GATEWAY_DISPATCHERS"
  for i in $(seq 1 "$WORKERS"); do
    launch "worker$i" "$PY" -m celery -A gateway_site worker --loglevel INFO "${concurrency[@]}" \
      -n "worker$i@%h"
  done
  wait_http "http://127.0.0.1:$WEB_PORT/healthz" 60 "$RUN/web.pid" || fail "the web server (gunicorn) did not start"
  echo "==> waiting for http://127.0.0.1:$WEB_PORT/readyz (a worker heartbeat)"
  wait_ready "http://127.0.0.1:$WEB_PORT/readyz" 90

  cat <<EOF

Stack is up and ready in $SECONDS s (logs and pid files in ${RUN#"$ROOT"/}/):
  API        http://127.0.0.1:$WEB_PORT/api/v1/batches   (docs: /api/docs/)
  admin      http://127.0.0.1:$WEB_PORT/admin/
  dashboard  http://127.0.0.1:$WEB_PORT/dashboard/
  metrics    http://127.0.0.1:$WEB_PORT/metrics   readiness: /readyz
$( [ -s "$RUN/metrics_token" ] && [ "$GATEWAY_METRICS_TOKEN" = "$(cat "$RUN/metrics_token")" ] \
  && echo "             curl -H \"Authorization: Bearer \$(cat ${RUN#"$ROOT"/}/metrics_token)\" http://127.0.0.1:$WEB_PORT/metrics" )
$( [ "$SIM" = "1" ] && echo "  simulator  http://127.0.0.1:$SIM_PORT/_sim/counters" )
Same environment for management commands (also: scripts/up.sh env):
$(command_env)
  .venv/bin/python manage.py create_team demo && .venv/bin/python manage.py create_api_key --team demo
  .venv/bin/python manage.py createsuperuser
Stop everything: make down
EOF
}

case "${1:-start}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  env) env_only ;;
  *) echo "usage: $0 [start|stop|status|env]" >&2; exit 2 ;;
esac
