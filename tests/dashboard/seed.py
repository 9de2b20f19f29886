"""A small but varied dataset for the dashboard tests (and the browser screenshots)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from django.utils import timezone

from batches.models import Batch, BatchItem, BatchStatus, ItemStatus, TeamUsageDaily
from gateway_engine.retry import ErrorType
from providers.models import Provider, RoutingRule
from teams.models import Team

DB_SECRET = "sk-db-secret-9f8e7d6c5b4a"
ENV_SECRET = "sk-env-secret-1a2b3c4d5e6f"

PROVIDERS = [
    dict(name="alpha", rpm=60, tpm=100_000, max_concurrency=6, api_key=DB_SECRET),
    dict(name="beta", rpm=30, tpm=60_000, max_concurrency=3),
    dict(name="local", rpm=200, tpm=400_000, max_concurrency=20),
]


@dataclass
class Seeded:
    teams: dict[str, Team]
    providers: dict[str, Provider]
    completed: Batch
    running: Batch
    failed_item: BatchItem


def _provider(name: str, **kw) -> Provider:
    values = dict(
        base_url=f"http://127.0.0.1:18599/{name}/v1",
        model=f"{name}-chat",
        burst_seconds=5.0,
        timeout_seconds=30.0,
        max_retries=3,
    )
    values.update(kw)
    return Provider.objects.create(name=name, **values)


# (status, provider, error_type, status_code, message)
FAILURES = [
    ("alpha", ErrorType.SERVER_ERROR, 503, "upstream unavailable"),
    ("alpha", ErrorType.SERVER_ERROR, 502, "bad gateway"),
    ("beta", ErrorType.CLIENT_ERROR, 400, "max_tokens too large <script>alert(1)</script>"),
    ("beta", ErrorType.RATE_LIMITED, 429, "rate limited after 3 retries"),
    ("local", ErrorType.TIMEOUT, None, "read timeout after 30 s"),
    ("local", ErrorType.CONNECTION_ERROR, None, "connection refused"),
    ("alpha", ErrorType.QUOTA_IMPOSSIBLE, None, "needs 900000 tokens"),
]


def make_items(
    batch: Batch, n: int, *, now: dt.datetime, failures=FAILURES, running: int = 0
) -> list[BatchItem]:
    """n items: the first len(failures) failed as listed, `running` in flight, the rest succeeded."""
    names = [p["name"] for p in PROVIDERS]
    items = []
    for i in range(n):
        provider = names[i % len(names)]
        item = BatchItem(
            batch=batch,
            seq=i,
            custom_id=f"req-{i:05d}",
            route="intent",
            payload={
                "messages": [{"role": "user", "content": f"question {i}"}],
                "params": {"max_tokens": 64},
            },
            status=ItemStatus.SUCCEEDED,
            provider=provider,
            attempts=1 + (i % 7 == 0),
            latency_ms=120 + (i * 37) % 5000,
            response={"choices": [{"message": {"role": "assistant", "content": f"answer {i}"}}]},
            prompt_tokens=20,
            completion_tokens=40,
            total_tokens=60,
            retry_extra_tokens=60 if i % 7 == 0 else 0,
            attempt_log=[
                {"provider": provider, "status_code": 200, "error_type": "", "latency_ms": 100, "tokens": 60}
            ],
            started_at=now - dt.timedelta(seconds=30),
            finished_at=now - dt.timedelta(seconds=i % 240),
        )
        if i < len(failures):
            prov, etype, code, msg = failures[i]
            item.status, item.provider, item.error_type = ItemStatus.FAILED, prov, etype
            item.error_status_code, item.error_message = code, msg
            item.response, item.prompt_tokens, item.completion_tokens, item.total_tokens = (
                None,
                None,
                None,
                None,
            )
            item.attempts = 3
            item.attempt_log = [
                {"provider": prov, "status_code": code, "error_type": etype, "latency_ms": 900, "tokens": 0}
            ] * 3
        elif i >= n - running:
            item.status, item.latency_ms, item.finished_at = ItemStatus.RUNNING, None, None
            item.response, item.prompt_tokens, item.completion_tokens, item.total_tokens = (
                None,
                None,
                None,
                None,
            )
            item.attempt_log = []
        items.append(item)
    BatchItem.objects.bulk_create(items, batch_size=2000)
    return items


def stats_for(batch: Batch) -> dict:
    return {
        "batch_id": str(batch.pk),
        "task_total": batch.total_count,
        "success_count": batch.completed_count,
        "failed_count": batch.failed_count,
        "total_elapsed_ms": 420_000,
        "providers": {
            "alpha": {
                "request_count": 18,
                "avg_latency_ms": 2100,
                "p95_latency_ms": 3900,
                "error_count": 3,
                "retry_count": 2,
                "rate_limited_count": 0,
            },
            "beta": {
                "request_count": 15,
                "avg_latency_ms": 1800,
                "p95_latency_ms": 3100,
                "error_count": 2,
                "retry_count": 3,
                "rate_limited_count": 3,
            },
            "local": {
                "request_count": 17,
                "avg_latency_ms": 900,
                "p95_latency_ms": 1500,
                "error_count": 2,
                "retry_count": 1,
                "rate_limited_count": 0,
            },
        },
        "token_usage": {"prompt_tokens": 32000, "completion_tokens": 48000, "retry_extra_tokens": 640},
    }


def seed(n_completed: int = 50, n_running: int = 40) -> Seeded:
    now = timezone.now()
    teams = {name: Team.objects.get_or_create(name=name)[0] for name in ("acme", "globex")}
    providers = {p["name"]: _provider(**p) for p in PROVIDERS}
    for prio, name in enumerate(["alpha", "beta"]):
        RoutingRule.objects.create(route="intent", provider=providers[name], priority=prio)
    RoutingRule.objects.create(route="summary", provider=providers["local"])

    completed = Batch.objects.create(
        team=teams["acme"],
        status=BatchStatus.COMPLETED,
        total_count=n_completed,
        completed_count=n_completed - len(FAILURES),
        failed_count=len(FAILURES),
        started_at=now - dt.timedelta(minutes=8),
        completed_at=now - dt.timedelta(minutes=1),
        metadata={"job": "nightly-intent"},
    )
    completed.stats = stats_for(completed)
    completed.save(update_fields=["stats"])
    make_items(completed, n_completed, now=now)

    running = Batch.objects.create(
        team=teams["globex"],
        status=BatchStatus.RUNNING,
        total_count=n_running,
        completed_count=n_running - 15 - 2,
        failed_count=2,
        started_at=now - dt.timedelta(minutes=2),
    )
    make_items(running, n_running, now=now, failures=FAILURES[:2], running=15)
    for i in range(3):
        Batch.objects.create(
            team=teams["acme" if i % 2 else "globex"],
            status=[BatchStatus.QUEUED, BatchStatus.CANCELLED, BatchStatus.FAILED][i],
            total_count=10 * (i + 1),
        )

    today = now.date()
    rows = []
    for d in range(10):
        for team in teams.values():
            for k, name in enumerate(providers):
                rows.append(
                    TeamUsageDaily(
                        team=team,
                        provider=name,
                        day=today - dt.timedelta(days=d),
                        requests=100 + d * 10 + k,
                        items_succeeded=90 + d,
                        items_failed=d % 3,
                        prompt_tokens=20_000 + 1000 * d + 500 * k,
                        completion_tokens=30_000 + 700 * d,
                        wasted_tokens=(d % 4) * 800 + k * 50,
                    )
                )
    TeamUsageDaily.objects.bulk_create(rows)
    failed_item = BatchItem.objects.get(batch=completed, seq=2)
    return Seeded(
        teams=teams, providers=providers, completed=completed, running=running, failed_item=failed_item
    )


# --- edge cases for the 1280 px browser test -------------------------------------------------------

LONG_NAME = ("provider-with-a-very-long-name-" * 4)[:64]  # Provider.name's maximum
LONG_CUSTOM_ID = ("customer-1234567890-request-with-a-long-custom-id-" * 3)[:100]


@dataclass
class EdgeCases:
    wide_provider: Provider
    cancelled: Batch
    all_succeeded: Batch
    long_item: BatchItem
    long_team: Team


def add_edge_cases(seeded: Seeded) -> EdgeCases:
    """What breaks layouts: 64-character (the maximum) provider and 100-character team names and
    custom_ids, TPM 10,000,000, long request
    lines, a cancelled batch (some items never sent) and an all-succeeded batch."""
    now = timezone.now()
    wide = _provider(
        LONG_NAME,
        rpm=10_000,
        tpm=10_000_000,
        max_concurrency=1000,
        base_url="https://llm-gateway.internal.example.com/openai/deployments/a-very-long-deployment-name/v1",
        model="a-rather-long-model-name-2025-01-01-preview-with-extras",
    )
    RoutingRule.objects.create(route="a-long-route-name-for-the-layout-test", provider=wide, priority=3)
    long_team = Team.objects.create(name=("team-with-a-long-name-" * 5)[:100])

    cancelled = Batch.objects.create(
        team=seeded.teams["acme"],
        status=BatchStatus.CANCELLED,
        total_count=20,
        completed_count=6,
        failed_count=1,
        cancelled_count=13,
        started_at=now - dt.timedelta(minutes=3),
        completed_at=now - dt.timedelta(minutes=2),
        metadata={"job": "cancelled-by-ops", "note": "x" * 400},
    )
    items = make_items(cancelled, 20, now=now, failures=FAILURES[:1])
    BatchItem.objects.filter(batch=cancelled, seq__gte=7).update(
        status=ItemStatus.CANCELLED, provider="", attempts=0, latency_ms=None, response=None, finished_at=None
    )
    del items

    all_ok = Batch.objects.create(
        team=long_team,
        status=BatchStatus.COMPLETED,
        total_count=12,
        completed_count=12,
        started_at=now - dt.timedelta(minutes=5),
        completed_at=now - dt.timedelta(minutes=4),
    )
    make_items(all_ok, 12, now=now, failures=[])
    long_text = "word " * 300 + "x" * 600  # a long request line with and without spaces
    BatchItem.objects.filter(batch=all_ok, seq=0).update(
        custom_id=LONG_CUSTOM_ID,
        provider=LONG_NAME,
        payload={"messages": [{"role": "user", "content": long_text}], "params": {"max_tokens": 64}},
        response={"choices": [{"message": {"role": "assistant", "content": "y" * 900}}]},
    )
    long_item = BatchItem.objects.get(batch=all_ok, seq=0)
    return EdgeCases(
        wide_provider=wide,
        cancelled=cancelled,
        all_succeeded=all_ok,
        long_item=long_item,
        long_team=long_team,
    )
