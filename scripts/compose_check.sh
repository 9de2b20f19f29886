#!/usr/bin/env bash
# scripts/compose_check.sh: run the real docker-compose.yml end to end where public images can't be pulled.
#
#   sudo scripts/compose_check.sh        (not part of `make test`; the first run takes several minutes)
#
# 1. builds local stand-ins for the base images from Debian packages: debootstrap (bookworm, minbase,
#    with python3, postgresql-15, redis, prometheus) → `docker import` → bgw-local/debian:bookworm, then
#    bgw-local/python:3.11, bgw-local/postgres:15, bgw-local/redis:7, bgw-local/prometheus:2
#    (scripts/compose/*.Dockerfile); the Python dependencies come from a wheelhouse downloaded on this
#    host with pip;
# 2. runs docker-compose.yml with scripts/compose/docker-compose.check.yml (the stand-ins + the bundled
#    provider simulator as service `sim`) and the observability profile's Prometheus (Grafana is not in
#    Debian: not started) on free ports, with a throwaway .env from scripts/compose_secrets.sh;
# 3. loads examples/providers.json pointed at `sim`, creates a team and an API key, submits
#    examples/batch.jsonl through the stack's REST API and waits for the batch to finish;
# 4. asks Prometheus for a worker counter (gateway_items_total{status="succeeded"}, counted in the worker
#    container, served by web's /metrics from the shared multiprocess volume, scraped with
#    GATEWAY_METRICS_TOKEN) until it shows the batch's items;
# 5. tears the stack down (containers, network, volumes; the app image unless KEEP_IMAGES=1).
# Exits 0 only if the batch ended `completed` and Prometheus scraped its items.
#
# Needs root, docker (a daemon; started here if none answers, and stopped again), debootstrap, and
# `docker compose` or `docker-compose`. Debian: apt-get install docker.io docker-compose debootstrap.
#   COMPOSE_CHECK_CACHE  where the root file system tarball and wheelhouse are kept (default var/compose-check)
#   DEBIAN_MIRROR        default http://deb.debian.org/debian
#   CHECK_TIMEOUT        seconds to wait for the batch (default 300)
#   SCRAPE_TIMEOUT       seconds to wait for Prometheus to show the batch's items (default 120)
set -euo pipefail
export DOCKER_BUILDKIT=0  # the classic builder: Debian's docker.io has no buildx plugin
cd "$(dirname "$0")/.."
ROOT=$(pwd)
CACHE=${COMPOSE_CHECK_CACHE:-$ROOT/var/compose-check}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
SUITE=bookworm
PACKAGES=python3,python3-venv,python-is-python3,postgresql-15,redis-server,redis-tools,prometheus,ca-certificates
PROJECT=bgwcheck$$
OVERRIDE=scripts/compose/docker-compose.check.yml
PY="$ROOT/.venv/bin/python"
[ -x "$PY" ] || PY=python3

log() { printf '[compose-check %s] %s\n' "$(date -u +%H:%M:%S)" "$*"; }
die() { log "FAILED: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "run as root (dockerd, debootstrap and docker import need it)"
command -v docker >/dev/null || die "no docker CLI (apt-get install docker.io)"
command -v debootstrap >/dev/null || die "no debootstrap (apt-get install debootstrap)"
if docker compose version >/dev/null 2>&1; then
  COMPOSE=(docker compose)
elif command -v docker-compose >/dev/null; then
  COMPOSE=(docker-compose)
else
  die "neither 'docker compose' nor 'docker-compose' (apt-get install docker-compose)"
fi
mkdir -p "$CACHE"
: >"$CACHE/build.log"

DOCKERD_PID=""
CREATED_ENV=0
STACK_UP=0
cleanup() {
  local rc=$?
  if [ "$STACK_UP" = 1 ]; then
    if [ "$rc" != 0 ]; then
      log "last log lines of the stack:"
      compose logs --no-color --tail 30 2>&1 | tail -n 150 || true
    fi
    log "tearing the stack down"
    compose down --volumes --remove-orphans --timeout 10 >/dev/null 2>&1 || true
    [ "${KEEP_IMAGES:-0}" = 1 ] || docker image rm -f batch-gateway:compose-check >/dev/null 2>&1 || true
  fi
  [ "$CREATED_ENV" = 1 ] && rm -f "$ROOT/.env"
  if [ -n "$DOCKERD_PID" ]; then
    log "stopping the docker daemon this script started"
    kill "$DOCKERD_PID" 2>/dev/null || true
    wait "$DOCKERD_PID" 2>/dev/null || true
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# the observability profile is active for every command (so `down` removes Prometheus too); `up` names the
# services it starts (no Grafana)
compose() { "${COMPOSE[@]}" -p "$PROJECT" --profile observability -f docker-compose.yml -f "$OVERRIDE" "$@"; }

# --- docker daemon ----------------------------------------------------------------------------------
if ! docker info >/dev/null 2>&1; then
  command -v dockerd >/dev/null || die "no docker daemon answers and dockerd is not installed"
  log "starting dockerd (log: $CACHE/dockerd.log)"
  dockerd >"$CACHE/dockerd.log" 2>&1 &
  DOCKERD_PID=$!
  for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
  docker info >/dev/null 2>&1 || die "dockerd did not come up; see $CACHE/dockerd.log"
fi

# --- base images from Debian packages ---------------------------------------------------------------
if [ "$(cat "$CACHE/rootfs.packages" 2>/dev/null)" != "$PACKAGES" ]; then
  # a root file system (or image) from another package list: build both again
  rm -f "$CACHE/rootfs.tar"
  docker image rm -f bgw-local/python:3.11 "bgw-local/debian:$SUITE" >/dev/null 2>&1 || true
fi
if ! docker image inspect bgw-local/debian:$SUITE >/dev/null 2>&1; then
  if [ ! -s "$CACHE/rootfs.tar" ]; then
    log "debootstrap $SUITE with $PACKAGES (a few minutes)"
    rm -rf "$CACHE/rootfs"
    debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$CACHE/rootfs" "$MIRROR" \
      >"$CACHE/debootstrap.log" 2>&1 || die "debootstrap failed; see $CACHE/debootstrap.log"
    chroot "$CACHE/rootfs" apt-get clean
    tar -C "$CACHE/rootfs" --exclude='./proc/*' --exclude='./sys/*' --exclude='./dev/*' -cf "$CACHE/rootfs.tar.part" .
    mv "$CACHE/rootfs.tar.part" "$CACHE/rootfs.tar"
    printf '%s\n' "$PACKAGES" >"$CACHE/rootfs.packages"
    rm -rf "$CACHE/rootfs"
  fi
  log "docker import → bgw-local/debian:$SUITE"
  docker import "$CACHE/rootfs.tar" "bgw-local/debian:$SUITE" >/dev/null
fi

if ! docker image inspect bgw-local/python:3.11 >/dev/null 2>&1 || [ ! -f "$CACHE/wheels/.complete" ] \
  || [ "$(cat "$CACHE/wheels/.complete")" != "$(sha1sum pyproject.toml | cut -c1-40)" ]; then
  "$PY" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' \
    || die "the wheelhouse must be built with Python 3.11 (Debian bookworm's); $PY is $("$PY" -V)"
  log "wheelhouse: pip wheel . (the gateway's dependencies) + pip, setuptools, wheel, async-timeout"
  rm -rf "$CACHE/wheels"
  mkdir -p "$CACHE/wheels"
  # async-timeout: redis needs it below Python 3.11.3 (bookworm has 3.11.2; this host may be newer)
  "$PY" -m pip wheel --quiet --wheel-dir "$CACHE/wheels" . pip setuptools wheel "async-timeout>=4.0.3" 2>&1 \
    | grep -v "is neither a file nor a directory" || true
  rm -f "$CACHE"/wheels/batch_gateway-*.whl  # the project itself is installed from the build context
  compgen -G "$CACHE/wheels/[Dd]jango-5*.whl" >/dev/null || die "pip wheel failed (no Django wheel)"
  sha1sum pyproject.toml | cut -c1-40 >"$CACHE/wheels/.complete"
  ctx="$CACHE/python-context"
  rm -rf "$ctx" && mkdir -p "$ctx" && cp -r "$CACHE/wheels" "$ctx/wheels"
  log "docker build → bgw-local/python:3.11"
  docker image rm -f bgw-local/python:3.11 >/dev/null 2>&1 || true
  docker build --quiet -t bgw-local/python:3.11 -f scripts/compose/python.Dockerfile "$ctx" >/dev/null 2>>"$CACHE/build.log"
  rm -rf "$ctx"
fi
for name in postgres:15 redis:7 prometheus:2; do  # small layers on the imported root file system: always rebuilt
  log "docker build → bgw-local/$name"
  docker build --quiet -t "bgw-local/$name" -f "scripts/compose/${name%%:*}.Dockerfile" scripts/compose \
    >/dev/null 2>>"$CACHE/build.log"
done

# --- the stack --------------------------------------------------------------------------------------
if [ ! -f .env ]; then
  # docker-compose.yml reads .env; a throwaway one with generated secrets (removed at exit)
  CREATED_ENV=1
  bash scripts/compose_secrets.sh .env >/dev/null
fi
if ! grep -Eq '^GATEWAY_METRICS_TOKEN=.+' .env && [ -z "${GATEWAY_METRICS_TOKEN:-}" ]; then
  # your own .env has no token: one for this run (the shell's value wins over .env for web and Prometheus)
  GATEWAY_METRICS_TOKEN=$("$PY" -c 'import secrets; print(secrets.token_urlsafe(32))')
  export GATEWAY_METRICS_TOKEN
fi
free_port() { "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
WEB_PORT=$(free_port)
PROMETHEUS_PORT=$(free_port)
export WEB_PORT PROMETHEUS_PORT
WEB="http://127.0.0.1:$WEB_PORT"
PROM="http://127.0.0.1:$PROMETHEUS_PORT"

log "docker compose build (app image on bgw-local/python:3.11)"
compose build --quiet >/dev/null 2>>"$CACHE/build.log" || { tail -n 40 "$CACHE/build.log" >&2; die "compose build"; }
STACK_UP=1
log "docker compose up: postgres, redis, migrate, web, worker, sim, prometheus (web on $WEB, Prometheus on $PROM)"
compose up -d web worker sim prometheus >/dev/null 2>"$CACHE/up.log" || { cat "$CACHE/up.log" >&2; die "compose up"; }

deadline=$((SECONDS + 180))
until curl -fsS "$WEB/healthz" >/dev/null 2>&1; do
  [ $SECONDS -lt $deadline ] || die "web did not answer $WEB/healthz within 180 s"
  sleep 2
done
log "web answers /healthz"

manage() { compose exec -T web python manage.py "$@" --settings=gateway_site.settings.production; }
sed 's#http://127.0.0.1:8900/#http://sim.compose.internal:8900/#g' examples/providers.json \
  | compose exec -T web sh -c 'cat > /tmp/providers.json'
manage load_providers /tmp/providers.json
manage create_team compose-check
KEY=$(manage create_api_key --team compose-check --name compose-check | tail -n 1 | tr -d '\r')
[ -n "$KEY" ] || die "create_api_key printed no key"

log "POST /api/v1/batches (examples/batch.jsonl)"
created=$(curl -fsS -X POST "$WEB/api/v1/batches" -H "Authorization: Bearer $KEY" \
  -H 'Content-Type: application/jsonl' --data-binary @examples/batch.jsonl) || die "submission refused"
BATCH=$(printf '%s' "$created" | "$PY" -c 'import json, sys; print(json.load(sys.stdin)["id"])')
log "batch $BATCH queued; waiting for it to finish"

deadline=$((SECONDS + ${CHECK_TIMEOUT:-300}))
while :; do
  batch=$(curl -fsS "$WEB/api/v1/batches/$BATCH" -H "Authorization: Bearer $KEY") || die "GET batch"
  read -r status counts < <(printf '%s' "$batch" | "$PY" -c '
import json, sys
b = json.load(sys.stdin)
print(b["status"], json.dumps(b["request_counts"], separators=(",", ":")))')
  log "status $status $counts"
  case "$status" in
    completed) break ;;
    failed | cancelled | expired) die "batch ended $status" ;;
  esac
  [ $SECONDS -lt $deadline ] || die "batch still $status after ${CHECK_TIMEOUT:-300} s"
  sleep 5
done
log "batch $BATCH completed ($counts); asking Prometheus for the worker counter"

succeeded=$(printf '%s' "$counts" | "$PY" -c 'import json, sys; print(json.load(sys.stdin)["completed"])')
QUERY='sum(gateway_items_total{status="succeeded"})'
deadline=$((SECONDS + ${SCRAPE_TIMEOUT:-120}))
while :; do
  seen=$(curl -fsS -G "$PROM/api/v1/query" --data-urlencode "query=$QUERY" 2>/dev/null | "$PY" -c '
import json, sys
try:
    result = json.load(sys.stdin)["data"]["result"]
    print(int(float(result[0]["value"][1])) if result else 0)
except Exception:
    print(-1)') || seen=-1
  log "Prometheus: $QUERY = $seen (want >= $succeeded)"
  [ "$seen" -ge "$succeeded" ] && break
  if [ $SECONDS -ge $deadline ]; then
    curl -fsS "$PROM/api/v1/targets" 2>/dev/null | head -c 2000 >&2 || true
    die "Prometheus did not show the batch's items within ${SCRAPE_TIMEOUT:-120} s (targets above)"
  fi
  sleep 5
done
log "OK: the compose stack ran batch $BATCH to completed ($counts) and Prometheus scraped $seen succeeded items"
