#!/usr/bin/env bash
# scripts/compose_secrets.sh [ENV_FILE]: the generated secrets docker-compose.yml needs, in ENV_FILE
# (default .env, created from .env.example when missing; mode 0600).
#   DJANGO_SECRET_KEY       replaced when empty or the .env.example placeholder
#   GATEWAY_METRICS_TOKEN   web requires it on /metrics; the observability profile's Prometheus sends it
#   GATEWAY_SECRET_KEYS     the Fernet key provider keys are stored encrypted with (production requires it)
#   GRAFANA_ADMIN_PASSWORD  the observability profile's Grafana refuses to start without one
# A value already set is kept (run it again after pulling a new .env.example). Prints the names it set,
# never a value: read them from the file (e.g. `grep GRAFANA_ADMIN_PASSWORD .env`).
set -euo pipefail
cd "$(dirname "$0")/.."
ENV_FILE=${1:-.env}
PY=.venv/bin/python
[ -x "$PY" ] || PY=python3

if [ ! -e "$ENV_FILE" ]; then
  (umask 077 && cp .env.example "$ENV_FILE")
  echo "created $ENV_FILE from .env.example"
fi
chmod 600 "$ENV_FILE"

"$PY" - "$ENV_FILE" <<'EOF'
import base64
import os
import re
import secrets
import sys

path = sys.argv[1]
lines = open(path, encoding="utf-8").read().splitlines()
PLACEHOLDER = re.compile(r"change-me|changeme|example|placeholder|your-secret", re.I)
wanted = {
    "DJANGO_SECRET_KEY": lambda: secrets.token_urlsafe(50),
    "GATEWAY_METRICS_TOKEN": lambda: secrets.token_urlsafe(32),
    "GATEWAY_SECRET_KEYS": lambda: base64.urlsafe_b64encode(secrets.token_bytes(32)).decode(),
    "GRAFANA_ADMIN_PASSWORD": lambda: secrets.token_urlsafe(24),
}
done = set()
changed = []
for i, line in enumerate(lines):
    m = re.match(r"^\s*([A-Z_][A-Z0-9_]*)=(.*)$", line)
    if not m or m.group(1) not in wanted or m.group(1) in done:
        continue
    name, value = m.group(1), m.group(2).strip().strip("'\"")
    done.add(name)
    if not value or PLACEHOLDER.search(value):
        lines[i] = f"{name}={wanted[name]()}"
        changed.append(name)
for name, make in wanted.items():
    if name not in done:
        lines.append(f"{name}={make()}")
        changed.append(name)
tmp = f"{path}.tmp{os.getpid()}"
fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
with os.fdopen(fd, "w", encoding="utf-8") as f:
    f.write("\n".join(lines) + "\n")
os.replace(tmp, path)
print(f"{path}: " + (f"generated {', '.join(changed)}" if changed else "every secret already set"))
EOF
