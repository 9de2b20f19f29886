#!/usr/bin/env bash
# Foundation demo (the full simulator-backed demo replaces this): fresh SQLite database, providers
# loaded from examples/providers.json twice (the second run must report no changes), a team and key.
set -euo pipefail
cd "$(dirname "$0")/.."
export DJANGO_SETTINGS_MODULE=gateway_site.settings.local
export DATABASE_URL=sqlite:///var/demo.sqlite3
unset REDIS_URL
mkdir -p var && rm -f var/demo.sqlite3
PY=.venv/bin/python
$PY manage.py migrate --noinput >/dev/null
$PY manage.py load_providers examples/providers.json
second=$($PY manage.py load_providers examples/providers.json)
[ "$second" = "no changes" ] || { echo "second load reported changes: $second" >&2; exit 1; }
$PY manage.py create_team demo
key=$($PY manage.py create_api_key --team demo --name demo | tail -n 1)
[ -n "$key" ] || exit 1
echo "demo team key created (prefix ${key:0:12}…)"
