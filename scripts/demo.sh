#!/usr/bin/env bash
# `make demo`: the main job with zero services (contract §1).
#   SQLite under var/, no REDIS_URL (eager Celery, in-process quota store), the bundled provider
#   simulator (examples/sim-kinds.json: one provider of each kind — openai, anthropic, gemini,
#   azure_openai — 10x time-compressed), the web server,
#   and examples/batch.jsonl (50 user messages x intent/sentiment/summary) submitted over real HTTP.
# Exits 0 only if the batch completed with success_count == items. Stops everything it started.
#   DEMO_KEEP=1   keep the web server and simulator running after the report (Ctrl-C stops them)
#   SIM_PORT / WEB_PORT   preferred ports (default 8900 / 8000; a free port is used if busy)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
PY="$ROOT/.venv/bin/python"
[ -x "$PY" ] || PY=python3

export DJANGO_SETTINGS_MODULE=gateway_site.settings.local
export DATABASE_URL="sqlite:///$ROOT/var/demo.sqlite3"
unset REDIS_URL CELERY_BROKER_URL CELERY_TASK_ALWAYS_EAGER
export DJANGO_LOG_LEVEL=${DJANGO_LOG_LEVEL:-WARNING}
export GATEWAY_LOG_FORMAT=${GATEWAY_LOG_FORMAT:-console}  # human-readable logs in the demo
LOGS="$ROOT/var/demo"
mkdir -p "$LOGS"
rm -f "$ROOT"/var/demo.sqlite3*

PIDS=()
cleanup() {
  local pid left i
  for pid in "${PIDS[@]:-}"; do
    [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
  done
  # the servers stop within a second or two; one that has not after 10 s is killed, and named
  for i in $(seq 1 100); do
    left=""
    for pid in "${PIDS[@]:-}"; do
      [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && left="$left $pid"
    done
    [ -z "$left" ] && break
    sleep 0.1
  done
  for pid in $left; do
    echo "process $pid ($(ps -o args= -p "$pid" 2>/dev/null | cut -c1-80)) still running 10 s after SIGTERM: killed" >&2
    kill -9 "$pid" 2>/dev/null || true
  done
  for pid in "${PIDS[@]:-}"; do
    [ -n "$pid" ] && wait "$pid" 2>/dev/null || true
  done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() {  # the preferred port if it is free, else any free port
  "$PY" - "$1" <<'EOF'
import socket, sys
want = int(sys.argv[1])
for port in (want, 0):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        continue
    print(s.getsockname()[1])
    s.close()
    break
EOF
}

wait_http() {  # URL SECONDS PID
  local url=$1 deadline=$((SECONDS + $2)) pid=$3
  until "$PY" -c "import httpx,sys; sys.exit(0 if httpx.get('$url', timeout=2).status_code == 200 else 1)" 2>/dev/null; do
    kill -0 "$pid" 2>/dev/null || { echo "process $pid exited; see $LOGS" >&2; return 1; }
    [ $SECONDS -lt $deadline ] || { echo "timed out waiting for $url" >&2; return 1; }
    sleep 0.3
  done
}

SIM_PORT=$(free_port "${SIM_PORT:-8900}")
WEB_PORT=$(free_port "${WEB_PORT:-8000}")
SIM_URL="http://127.0.0.1:$SIM_PORT"
WEB_URL="http://127.0.0.1:$WEB_PORT"

echo "==> provider simulator (examples/sim-kinds.json: one provider of each kind) on $SIM_URL"
"$PY" -m sim --config examples/sim-kinds.json --port "$SIM_PORT" >"$LOGS/sim.log" 2>&1 &
PIDS+=($!)
SIM_PID=$!

echo "==> database (SQLite var/demo.sqlite3), providers, team, API key"
"$PY" manage.py migrate --noinput >"$LOGS/migrate.log"
# examples/providers.json points at port 8900; rewrite it for the port actually used
sed "s#127.0.0.1:8900/#127.0.0.1:$SIM_PORT/#g" examples/providers.json >"$LOGS/providers.json"
"$PY" manage.py load_providers "$LOGS/providers.json"
second=$("$PY" manage.py load_providers "$LOGS/providers.json")
[ "$second" = "no changes" ] || { echo "second load reported changes: $second" >&2; exit 1; }
"$PY" manage.py create_team demo
KEY=$("$PY" manage.py create_api_key --team demo --name demo | tail -n 1)
[ -n "$KEY" ] || { echo "no API key printed" >&2; exit 1; }
echo "API key for team demo: ${KEY:0:12}… (full key in $LOGS/api_key)"
# a staff login for the admin and dashboards (this demo database only; a new password every run)
ADMIN_USER=demo
ADMIN_PASSWORD=$("$PY" -c 'import secrets; print(secrets.token_urlsafe(12))')
DJANGO_SUPERUSER_PASSWORD="$ADMIN_PASSWORD" "$PY" manage.py createsuperuser --noinput \
  --username "$ADMIN_USER" --email demo@example.invalid >"$LOGS/superuser.log"

echo "==> web server on $WEB_URL (single process, eager Celery)"
"$PY" manage.py runserver "127.0.0.1:$WEB_PORT" --noreload >"$LOGS/web.log" 2>&1 &
PIDS+=($!)
WEB_PID=$!
wait_http "$SIM_URL/_sim/health" 30 "$SIM_PID"
wait_http "$WEB_URL/healthz" 60 "$WEB_PID"

echo "==> submitting examples/batch.jsonl"
status=0
# the client also writes the key file (mode 0600, no trailing newline: read as is, e.g. into the openai SDK)
"$PY" scripts/demo_client.py --web "$WEB_URL" --key "$KEY" --file examples/batch.jsonl --sim "$SIM_URL" \
  --key-file "$LOGS/api_key" --providers "$LOGS/providers.json" --timeout "${DEMO_TIMEOUT:-150}" || status=$?

cat <<EOF

Where to look:
  admin      $WEB_URL/admin/
  dashboard  $WEB_URL/dashboard/
  API docs   $WEB_URL/api/docs/
  login      user $ADMIN_USER  password $ADMIN_PASSWORD   (staff; this demo database only)
Logs: $LOGS/
EOF

if [ "${DEMO_KEEP:-0}" = "1" ]; then
  echo "DEMO_KEEP=1: the web server and simulator keep running; press Ctrl-C to stop them."
  # Ctrl-C is the documented way to end a kept demo: not an error (make would print "Error 130")
  trap 'echo; echo "stopped."; exit "$status"' INT TERM
  wait "$WEB_PID" || true
else
  cat <<EOF
The servers have stopped. To browse the demo's data, keep them running:  DEMO_KEEP=1 make demo
  (or serve this database yourself: DATABASE_URL=$DATABASE_URL $PY manage.py runserver $WEB_PORT)
EOF
fi
exit "$status"
