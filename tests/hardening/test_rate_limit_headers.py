"""Rate-limit headers in every format are believed only up to the ceiling (issue #13)."""

from __future__ import annotations

import asyncio
from email.utils import formatdate

import pytest

from gateway_engine import CrossProviderBatcher, EngineOptions, RetryPolicy
from gateway_engine.breaker import BreakerConfig, LocalBreaker
from gateway_engine.quota.local import LocalQuotaStore
from gateway_engine.retry import parse_reset_duration, parse_retry_after, rate_limit_wait
from gateway_engine.routing import routing_table_from_config

NOW = 1_800_000_000.0


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("2", 2.0),
        ("1.5", 1.5),
        ("6m0s", 360.0),
        ("1m30.5s", 90.5),
        ("250ms", 0.25),
        ("1h2m3s", 3723.0),
        ("-3", 0.0),
        (formatdate(NOW + 7, usegmt=True), 7.0),
        (formatdate(NOW - 7, usegmt=True), 0.0),
    ],
)
def test_every_format_is_read(value, seconds):
    from gateway_engine.retry import header_seconds

    assert header_seconds(value, now=NOW) == pytest.approx(seconds)


@pytest.mark.parametrize("value", ["soon", "", "NaN", "1e309", "inf", "5x", "m5", "9" * 80, None])
def test_unreadable_values_are_none(value):
    from gateway_engine.retry import header_seconds

    assert header_seconds(value, now=NOW) is None


def test_unix_times_in_reset_headers():
    assert parse_reset_duration(str(int(NOW + 30)), now=NOW) == pytest.approx(30.0)
    assert parse_reset_duration(str(int(NOW - 30)), now=NOW) == 0.0


def test_beyond_the_ceiling_is_ignored_and_logged(caplog):
    assert parse_retry_after("601") is None
    assert parse_retry_after("600") == 600.0
    assert parse_reset_duration("99999999") is None  # three years: malformed
    assert parse_reset_duration("11m") is None
    assert parse_retry_after("30", ceiling=10) is None
    assert "ceiling" in caplog.text
    # a believable reset wins over an absurd one; nothing believable → None (the item's backoff)
    assert rate_limit_wait({"x-ratelimit-reset-requests": "99999999", "x-ratelimit-reset-tokens": "2s"}) == 2
    assert rate_limit_wait({"retry-after": "99999999", "x-ratelimit-reset-tokens": "3s"}) == 3
    assert rate_limit_wait({"retry-after": "99999999", "x-ratelimit-reset-requests": "99999999"}) is None


def test_a_429_asking_for_three_years_does_not_pause_the_provider(broken):
    """Pre-fix: the 429's x-ratelimit-reset-requests of 99999999 s paused the provider (capped at
    600 s by the old code) and the item slept that long before its retry."""
    table = routing_table_from_config(
        {
            "providers": [
                {
                    "name": "reset_429",
                    "base_url": broken.url("reset_429"),
                    "model": "m",
                    "rpm": 6000,
                    "tpm": 10**7,
                    "max_concurrency": 4,
                    "timeout_seconds": 5,
                    "max_retries": 2,
                }
            ],
            "routes": [],
        }
    )
    store = LocalQuotaStore(global_max_in_flight=8)
    batcher = CrossProviderBatcher(
        table,
        store=store,
        breaker=LocalBreaker(BreakerConfig()),
        options=EngineOptions(retry=RetryPolicy(base_seconds=0.01, cap_seconds=0.05)),
    )
    before = broken.counts()["by_mode"].get("reset_429", 0)

    async def run():
        results = await asyncio.wait_for(
            batcher.abatch(
                [{"custom_id": f"r{i}", "provider": "reset_429", "query": "hi"} for i in range(3)]
            ),
            timeout=30,
        )
        limits = table.providers["reset_429"].limits
        return results, await store.snapshot(limits)

    results, state = asyncio.run(run())
    assert [(r.error_type, r.error_status_code, r.attempts) for r in results] == [
        ("rate_limited", 429, 3)
    ] * 3
    assert broken.counts()["by_mode"]["reset_429"] - before == 9  # max_retries + 1 calls per item
    assert state.paused_until_ms == 0  # the absurd header was ignored: no pause at all
    assert state.wait_ms < 1000


def test_reconcile_debt_is_clamped_to_one_bucket():
    """Pre-fix: a 10^12-token usage drove the TPM bucket to −10^12 (blocked for good)."""
    from gateway_engine.quota.types import ProviderLimits

    limits = ProviderLimits(
        name="p", rpm=6000, tpm=60_000, max_concurrency=4, burst_seconds=1.0, timeout_seconds=5.0
    )
    store = LocalQuotaStore(global_max_in_flight=8)

    async def run():
        reservation = await store.acquire(limits, 10)
        await store.reconcile(limits, reservation, 10**12)
        return await store.snapshot(limits)

    state = asyncio.run(run())
    assert state.tpm_tokens_available >= -limits.tpm_capacity - 10
    assert state.wait_ms <= 2_100  # at most about two bucket refills (1 s each), not 10^7 s
