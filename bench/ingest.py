"""Ingest benchmark: how long `POST /api/v1/batches` takes to accept a large JSONL batch.

    .venv/bin/python bench/ingest.py [--items 100000] [--repeat 3] [--no-socket] [--no-write]

Runs against PostgreSQL (DATABASE_URL, default a scratch database `gateway_bench_ingest` on
127.0.0.1:5432, created and migrated if missing). The POST is timed twice: over real HTTP to
gunicorn (1 sync worker, a free port on 127.0.0.1), and in-process through the WSGI test client (API-key
auth, body read, JSONL parse, validation of every item, COPY insert, commit, batch object). The
engine hand-off after commit is neutralised (in-memory broker / no-op): acceptance time only.

It also times the parse and validation steps alone, the same items through a DRF serializer
(ItemSerializer(many=True), the alternative the hand-written validator replaces), and streaming
every RESULT back with ?format=jsonl. Results go to docs/benchmarks.md between the `ingest` markers.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.common import git_rev, gunicorn_server, machine, replace_section, setup_django  # noqa: E402

BENCH_DB_URL = "postgres://postgres@127.0.0.1:5432/gateway_bench_ingest"
MARKER = "ingest"
GOAL_S = 10.0


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
    from providers.models import Provider, RoutingRule
    from teams.models import Team
    from teams.services import create_api_key, create_team

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


def measure(n: int, repeat: int, socket: bool) -> dict:
    from django.db import connection, reset_queries
    from rest_framework.test import APIClient

    import batches.submission as submission
    from batches.api.serializers import ItemSerializer
    from batches.models import Batch

    submission.enqueue.enqueue_start = lambda batch_id: None  # acceptance only: the engine is not started
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

    t0 = time.perf_counter()
    streamed = client.get(f"/api/v1/batches/{batch.id}/results?format=jsonl", HTTP_HOST="localhost")
    lines = sum(chunk.count(b"\n") for chunk in streamed.streaming_content)
    stream_s = time.perf_counter() - t0
    assert lines == n, f"streamed {lines} results, expected {n}"
    Batch.objects.filter(team=team).delete()

    socket_times = measure_over_socket(body, raw, repeat) if socket else []
    Batch.objects.filter(team=team).delete()

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
        "socket_s": socket_times,
        "stream_s": stream_s,
        "parse_s": parse_s,
        "validate_s": validate_s,
        "sample": len(sample),
        "drf_s": drf_s,
        "hand_s": hand_s,
        "db": f"{connection.vendor} {connection.pg_version // 10000 if connection.vendor == 'postgresql' else ''}".strip(),
    }


def measure_over_socket(body: bytes, raw_key: str, repeat: int) -> list[float]:
    """The same POST over real HTTP to gunicorn (1 sync worker) on a free port.

    Celery gets an in-memory broker there, so start_batch is queued but never run (acceptance only).
    """
    import httpx

    with gunicorn_server(timeout_s=120, wait_s=30) as (_proc, base):
        times = []
        headers = {"Authorization": f"Bearer {raw_key}", "Content-Type": "application/jsonl"}
        for _ in range(repeat):
            t0 = time.perf_counter()
            response = httpx.post(f"{base}/api/v1/batches", content=body, headers=headers, timeout=120)
            times.append(time.perf_counter() - t0)
            if response.status_code != 201:
                raise SystemExit(f"HTTP submission failed: {response.status_code} {response.text[:500]}")
        return times


def report(r: dict, command: str) -> str:
    def cell(times: list[float]) -> str:
        median = statistics.median(times)
        verdict = "meets" if median <= GOAL_S else "MISSES"
        return (
            f"median **{median:.2f} s**, best {min(times):.2f} s over {len(times)} runs "
            f"({verdict} the ≤ {GOAL_S:.0f} s goal)"
        )

    what = (
        f"`POST /api/v1/batches` ({r['body_mb']:.1f} MB JSONL, {r['items']:,} items) → 201, all rows stored"
    )
    rows = (
        [f"| {what}, over HTTP to gunicorn (1 sync worker) | {cell(r['socket_s'])} |"]
        if r["socket_s"]
        else []
    )
    rows.append(f"| the same, in-process (WSGI test client, full auth/DRF stack) | {cell(r['http_s'])} |")
    rows += [
        f"| parsing the JSONL (measured separately) | {r['parse_s']:.2f} s |",
        f"| validating every item, hand-written (measured separately) | {r['validate_s']:.2f} s |",
        f"| validating {r['sample']:,} items, hand-written | {r['hand_s']:.2f} s |",
        f"| the same {r['sample']:,} items through DRF `ItemSerializer(many=True)` | {r['drf_s']:.2f} s "
        f"({r['drf_s'] / r['hand_s']:.1f}× slower, and it checks less) |",
        f"| `GET …/results?format=jsonl` streaming all {r['items']:,} RESULTs (in-process) | {r['stream_s']:.2f} s |",
    ]
    table = "\n".join(rows)
    return f"""## Ingest: accepting a {r["items"]:,}-item JSONL batch

`{command}` — {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, commit {git_rev()}, {machine()}, {r["db"]}.
The machine was shared with other work while measuring; figures are wall-clock.

| what | time |
|---|---|
{table}

The rest of a request is the PostgreSQL `COPY` of the items (psycopg 3), the commit and the
response. The hand-off to the engine after commit is stubbed out (in-process) or queued on an
in-memory broker nobody reads (gunicorn), so these are acceptance times only.
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md alone")
    parser.add_argument("--no-socket", action="store_true", help="skip the run over HTTP to gunicorn")
    args = parser.parse_args()
    # no broker needed: the engine hand-off is stubbed in measure()
    setup_django(
        BENCH_DB_URL,
        GATEWAY_MAX_ITEMS_PER_BATCH=str(max(args.items, 50_000)),
        GATEWAY_API_THROTTLE_RATE="100000/min",
    )
    result = measure(args.items, args.repeat, socket=not args.no_socket)
    command = "python bench/ingest.py" + "".join(
        f" --{k} {v}"
        for k, v in (("items", args.items), ("repeat", args.repeat))
        if v != parser.get_default(k)
    )
    text = report(result, command)
    print(text)
    if not args.no_write:
        replace_section(ROOT / "docs" / "benchmarks.md", MARKER, text)
        print("written to docs/benchmarks.md")


if __name__ == "__main__":
    main()
