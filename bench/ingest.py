"""Ingest benchmark: how long `POST /api/v1/batches` takes to accept a large JSONL batch.

    .venv/bin/python bench/ingest.py [--items 100000] [--repeat 3] [--no-write]

Runs against PostgreSQL (DATABASE_URL, default a scratch database `gateway_bench_ingest` on
127.0.0.1:5432, created and migrated if missing). The request goes through the whole Django/DRF
stack in-process (WSGI test client: API-key auth, body read, JSONL parse, validation of every item,
COPY insert, commit, batch object rendering); only the loopback socket is left out. The hand-off to
the engine after commit is replaced by a no-op so the figure is the acceptance time only.

It also times the validation step alone, and the same items through a DRF serializer
(ItemSerializer(many=True)), the alternative the hand-written validator replaces.
Results are written to docs/benchmarks.md between the `ingest` markers.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH_DB_URL = "postgres://postgres@127.0.0.1:5432/gateway_bench_ingest"
MARKER = "ingest"
GOAL_S = 10.0


def setup_django(items: int) -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DATABASE_URL", BENCH_DB_URL)
    os.environ.pop("REDIS_URL", None)  # no broker needed: the engine hand-off is stubbed below
    os.environ["GATEWAY_MAX_ITEMS_PER_BATCH"] = str(max(items, 50_000))
    os.environ["GATEWAY_API_THROTTLE_RATE"] = "100000/min"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gateway_site.settings.local")
    _ensure_database(os.environ["DATABASE_URL"])
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def _ensure_database(url: str) -> None:
    if not url.startswith("postgres"):
        return
    import psycopg

    name = url.rsplit("/", 1)[1].split("?")[0]
    admin_url = url.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')


def make_items(n: int) -> list[dict]:
    """Realistic items: ~60% short queries, the rest chat messages with a system prompt and params."""
    items = []
    for i in range(n):
        if i % 5 < 3:
            items.append(
                {
                    "custom_id": f"req-{i:07d}",
                    "route": "intent",
                    "query": f"[u{i}] Hello, my order #{10000 + i % 90000} arrived late and the box was damaged. "
                    "Can you tell me what happens next?",
                    "params": {"max_tokens": 16},
                }
            )
        else:
            items.append(
                {
                    "custom_id": f"req-{i:07d}",
                    "provider": "beta",
                    "messages": [
                        {"role": "system", "content": "Summarise the customer message in one sentence."},
                        {
                            "role": "user",
                            "content": f"[u{i}] The mobile app keeps crashing when I open settings.",
                        },
                    ],
                    "params": {"max_tokens": 64, "temperature": 0.2},
                }
            )
    return items


def prepare_fixtures():
    from batches.models import Team
    from batches.services import create_api_key, create_team
    from providers.models import Provider, RoutingRule

    for name in ("alpha", "beta"):
        Provider.objects.update_or_create(
            name=name,
            defaults=dict(
                base_url=f"http://127.0.0.1:18499/{name}/v1", model=f"{name}-chat", rpm=600, tpm=1_000_000,
                max_concurrency=10, enabled=True,
            ),
        )  # fmt: skip
    RoutingRule.objects.get_or_create(route="intent", provider=Provider.objects.get(name="alpha"))
    team, _ = create_team("bench-ingest")
    _, raw = create_api_key(team, "bench")
    return Team.objects.get(pk=team.pk), raw


def measure(n: int, repeat: int) -> dict:
    from django.db import connection, reset_queries
    from rest_framework.test import APIClient

    import batches.submission as submission
    from batches.api.serializers import ItemSerializer
    from batches.models import Batch

    submission.enqueue_start = lambda batch_id: None  # acceptance only: the engine is not started
    team, raw = prepare_fixtures()
    items = make_items(n)
    body = ("\n".join(json.dumps(it, ensure_ascii=False) for it in items) + "\n").encode()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")

    http_times = []
    for _ in range(repeat):
        reset_queries()
        t0 = time.perf_counter()
        response = client.generic(
            "POST", "/api/v1/batches", body, content_type="application/jsonl", HTTP_HOST="localhost"
        )
        http_times.append(time.perf_counter() - t0)
        if response.status_code != 201:
            raise SystemExit(f"submission failed: {response.status_code} {response.content[:500]!r}")
        batch = Batch.objects.get(pk=response.json()["id"])
        assert batch.items.count() == n, "not every item was stored"

    # The breakdown runs the steps the way the request does (cyclic GC paused).
    with submission.paused_gc():
        t0 = time.perf_counter()
        parsed = submission.parse_jsonl(body)
        parse_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        submission.validate_items(parsed.items, parsed.item_sizes)
        validate_s = time.perf_counter() - t0
    del parsed

    sample = items[: min(n, 50_000)]
    with submission.paused_gc():
        t0 = time.perf_counter()
        serializer = ItemSerializer(data=sample, many=True)
        serializer.is_valid()
        drf_s = time.perf_counter() - t0
        del serializer
        t0 = time.perf_counter()
        submission.validate_items(sample)
        hand_s = time.perf_counter() - t0

    Batch.objects.filter(team=team).delete()  # keep the scratch database small
    return {
        "items": n,
        "body_mb": len(body) / 1e6,
        "http_s": http_times,
        "parse_s": parse_s,
        "validate_s": validate_s,
        "sample": len(sample),
        "drf_s": drf_s,
        "hand_s": hand_s,
        "db": f"{connection.vendor} {connection.pg_version // 10000 if connection.vendor == 'postgresql' else ''}".strip(),
    }


def machine() -> str:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{os.cpu_count()} cores ({cpu}), Python {platform.python_version()}, {platform.system()} {platform.release()}"


def git_rev() -> str:
    try:
        return subprocess.check_output(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True).strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"


def report(r: dict, command: str) -> str:
    best, median = min(r["http_s"]), statistics.median(r["http_s"])
    verdict = "meets" if median <= GOAL_S else "MISSES"
    return f"""## Ingest: accepting a {r["items"]:,}-item JSONL batch

`{command}` — {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, commit {git_rev()}, {machine()}, {r["db"]}.
The machine was shared with other work while measuring; figures are wall-clock.

| what | time |
|---|---|
| `POST /api/v1/batches` ({r["body_mb"]:.1f} MB JSONL, {r["items"]:,} items) → 201, all rows stored | median **{median:.2f} s**, best {best:.2f} s over {len(r["http_s"])} runs ({verdict} the ≤ {GOAL_S:.0f} s goal) |
| of which: JSONL parse (measured separately) | {r["parse_s"]:.2f} s |
| of which: validating every item, hand-written (measured separately) | {r["validate_s"]:.2f} s |
| validating {r["sample"]:,} items, hand-written (measured separately) | {r["hand_s"]:.2f} s |
| the same {r["sample"]:,} items through DRF `ItemSerializer(many=True)` | {r["drf_s"]:.2f} s ({r["drf_s"] / r["hand_s"]:.0f}× slower, and it checks less) |

The rest of the request is the PostgreSQL `COPY` of the items (psycopg 3), the commit and the
response. The request runs in-process (WSGI test client, full auth/DRF stack); the engine hand-off
after commit is stubbed out, so this is the acceptance time only.
"""


def replace_section(path: Path, body: str) -> None:
    begin, end = f"<!-- {MARKER}:begin -->", f"<!-- {MARKER}:end -->"
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    block = f"{begin}\n{body.rstrip()}\n{end}"
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.S)
    text = (
        pattern.sub(lambda _m: block, text) if pattern.search(text) else text.rstrip() + "\n\n" + block + "\n"
    )
    path.write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md alone")
    args = parser.parse_args()
    setup_django(args.items)
    result = measure(args.items, args.repeat)
    command = "python bench/ingest.py" + "".join(
        f" --{k} {v}"
        for k, v in (("items", args.items), ("repeat", args.repeat))
        if v != parser.get_default(k)
    )
    text = report(result, command)
    print(text)
    if not args.no_write:
        replace_section(ROOT / "docs" / "benchmarks.md", text)
        print("written to docs/benchmarks.md")


if __name__ == "__main__":
    main()
