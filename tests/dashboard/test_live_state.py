"""The providers page reads live quota and breaker state, and degrades visibly when it cannot."""

from __future__ import annotations

import asyncio

import pytest
from django.urls import reverse

from dashboard import live
from gateway_engine.quota.types import ProviderLimits
from providers.adapters import provider_limits
from tests.servers import free_port


@pytest.fixture
def fresh_stores():
    """Process-wide quota store and breaker rebuilt from the current settings, before and after."""
    from providers.limits import reset_quota_store
    from providers.shared_breaker import reset_breaker

    reset_quota_store()
    reset_breaker()
    yield
    reset_quota_store()
    reset_breaker()


def _take(limits: ProviderLimits, n: int, tokens: int) -> None:
    from providers.limits import get_quota_store

    async def run():
        store = get_quota_store()
        try:
            for _ in range(n):
                await store.acquire(limits, tokens)
        finally:
            await store.aclose()

    asyncio.run(run())


def test_providers_page_shows_live_bucket_levels_from_the_quota_store(
    staff_client, seeded, redis_sync, fresh_stores
):
    alpha = provider_limits(seeded.providers["alpha"])
    _take(alpha, 3, 1000)  # 3 requests, 3000 tokens granted just now
    response = staff_client.get(reverse("dashboard:providers"))
    assert response.status_code == 200
    assert response.context["quota_error"] is None, response.context["quota_error"]
    rows = {r["config"].name: r for r in response.context["rows"]}
    state = rows["alpha"]["quota"]
    assert state is not None and state.observed_rpm == 3 and state.observed_tpm == 3000
    assert state.rpm_tokens_available <= alpha.rpm_capacity - 3 + 0.5  # refills slowly (1/s)
    assert rows["beta"]["quota"].observed_rpm == 0
    assert rows["alpha"]["breaker"] == "closed"
    assert b"3 / 60" in response.content  # observed / configured RPM
    assert b'http-equiv="refresh"' in response.content


def test_redis_down_shows_a_banner_not_a_crash(staff_client, seeded, settings, fresh_stores):
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    settings.GATEWAY_QUOTA_BACKEND = "redis"
    response = staff_client.get(reverse("dashboard:providers"))
    assert response.status_code == 200
    assert response.context["quota_error"].startswith("quota store unavailable: ")
    assert response.context["breaker_error"].startswith("breaker state unavailable: ")
    assert b"quota store unavailable: " in response.content
    # the configuration and recent activity from the database are still there
    assert {r["config"].name for r in response.context["rows"]} == {"alpha", "beta", "local"}
    assert all(r["quota"] is None for r in response.context["rows"])


def test_any_snapshot_failure_is_reported_verbatim(monkeypatch, staff_client, seeded):
    def broken(what):
        def fail(_names):
            raise RuntimeError(f"{what} exploded")

        return fail

    monkeypatch.setattr(live, "snapshot_all_sync", broken("quota"))
    monkeypatch.setattr(live, "breaker_snapshot_sync", broken("breaker"))
    response = staff_client.get(reverse("dashboard:providers"))
    assert response.status_code == 200
    assert response.context["quota_error"] == "quota store unavailable: RuntimeError: quota exploded"
    assert response.context["breaker_error"] == "breaker state unavailable: RuntimeError: breaker exploded"


def test_recent_activity_error_rate_and_latency(staff_client, seeded):
    response = staff_client.get(reverse("dashboard:providers"))
    rows = {r["config"].name: r for r in response.context["rows"]}
    local = rows["local"]["recent"]
    # seed: items finished within the last 4 minutes; local has a timeout and a connection error
    assert local.failed == 2 and local.timeouts == 1
    assert local.error_rate_pct == pytest.approx(100 * 2 / local.finished)
    assert local.avg_latency_ms is not None


def test_bucket_wait_from_level_and_rate():
    assert live.bucket_wait_ms(5.0, 60) == 0
    assert live.bucket_wait_ms(0.5, 60) == 500  # half a request missing at 1 request/s
    assert live.bucket_wait_ms(-2.0, 60) == 3000  # TPM debt after an overage
    assert live.bucket_wait_ms(None, 60) is None


def test_drained_bucket_shows_its_wait(staff_client, seeded, redis_sync, fresh_stores):
    beta = provider_limits(seeded.providers["beta"])  # rpm 30, burst 5 s → 2.5 requests
    _take(beta, 2, 10)
    response = staff_client.get(reverse("dashboard:providers"))
    row = {r["config"].name: r for r in response.context["rows"]}["beta"]
    assert row["quota"].rpm_tokens_available < 1
    assert row["rpm_wait_ms"] > 0
    assert b"empty: next in" in response.content


def test_providers_page_shows_the_adjusted_rate_and_outside_use_of_a_shared_key(
    staff_client, seeded, redis_sync, fresh_stores
):
    from gateway_engine.quota.adaptive import Remaining, RemainingQuota
    from providers.limits import get_quota_store

    alpha = provider_limits(seeded.providers["alpha"])
    assert alpha.adaptive  # the default for an openai provider

    async def run():
        store = get_quota_store()
        try:
            res = await store.acquire(alpha, 10)
            await store.follow_remaining(alpha, res, RemainingQuota(requests=Remaining(2, 0.0)))
            await asyncio.sleep(1.05)  # an outside-use estimate spans at least a second
            await store.follow_remaining(alpha, res, RemainingQuota(requests=Remaining(1, 30.0)))
        finally:
            await store.aclose()

    asyncio.run(run())
    response = staff_client.get(reverse("dashboard:providers"))
    state = {r["config"].name: r for r in response.context["rows"]}["alpha"]["quota"]
    assert state.adjusted_rpm == pytest.approx(2.0, rel=0.05)  # 1 left over 30 s
    assert state.outside_rpm and state.outside_rpm > 0
    assert b"adjusted 2/min" in response.content and b"outside use" in response.content
    # and the metrics export both (observability/collector.py, read at scrape time from the shared store)
    from observability.collector import quota_families

    families = {f.name: f for f in quota_families([alpha])}
    adjusted = {tuple(s.labels.values()): s.value for s in families["gateway_quota_adjusted_rate"].samples}
    assert adjusted[("alpha", "rpm")] == pytest.approx(2.0, rel=0.05)
    outside = {tuple(s.labels.values()): s.value for s in families["gateway_quota_outside_use"].samples}
    assert outside[("alpha", "rpm")] > 0
