"""Shared keys (gateway_engine/quota/adaptive.py, the ADAPT script of lua_adaptive.py, the header reading of
gateway_engine/remaining.py): the buckets follow the remaining-quota headers the provider sends.

Every test taking ``store`` runs against the in-process store AND the Redis store (conftest.py); the
``clocked_store`` tests pin the exact numbers on the in-process store with a fake clock (the Redis
store's clock is the server's TIME). docs/quota.md "Shared keys" states the rule tested here.
"""

from __future__ import annotations

import logging
from dataclasses import replace

import pytest
from django.conf import settings

from gateway_engine.provider_file import PROVIDER_KINDS
from gateway_engine.quota.adaptive import Remaining, RemainingQuota
from gateway_engine.quota.redis_store import RedisQuotaStore
from gateway_engine.remaining import HEADER_SEMANTICS, remaining_quota

from .conftest import make_limits, redis_prefix, run

CEILING = 600.0


def adaptive_limits(**kwargs):
    # rpm 600 (10/s), burst 1 s: capacity 10 requests; tpm 60 000 (1 000/s): capacity 1 000 tokens
    return replace(make_limits(**kwargs), adaptive=True)


def requests_left(remaining: float, reset_seconds: float) -> RemainingQuota:
    return RemainingQuota(requests=Remaining(remaining, reset_seconds))


def test_remaining_caps_the_level_and_slows_the_refill(store):
    limits = adaptive_limits()

    async def body():
        res = await store.acquire(limits)
        assert await store.follow_remaining(limits, res, requests_left(3, 1.0))  # 3 left for 1 s
        state = await store.snapshot(limits)
        assert state.rpm_tokens_available <= 3.1  # 9 before: at most what is left
        assert state.adjusted_rpm == pytest.approx(180.0)  # 3 per second, not the configured 600
        for _ in range(3):
            assert (await store.try_acquire(limits)).granted
        denied = await store.try_acquire(limits)
        # the next token comes at the adjusted 3/s (~333 ms), not the configured 10/s (100 ms)
        assert not denied.granted and denied.wait_ms > 250

    run(store, body)


def test_what_was_sent_since_the_request_is_subtracted(store):
    limits = adaptive_limits()

    async def body():
        first = await store.acquire(limits)
        for _ in range(4):
            await store.acquire(limits)  # sent after ``first``: the provider had not counted them
        assert await store.follow_remaining(limits, first, requests_left(6, 2.0))
        state = await store.snapshot(limits)
        assert state.rpm_tokens_available <= 2.1  # 6 − 4
        assert state.adjusted_rpm == pytest.approx(60.0)  # 2 left over 2 s

    run(store, body)


def test_a_header_above_the_configured_rate_never_raises_the_bucket(store):
    limits = adaptive_limits()

    async def body():
        for _ in range(10):
            res = await store.acquire(limits)
        # more than the configured 600/min: ignored
        assert not await store.follow_remaining(limits, res, requests_left(5000, 1.0))
        # plenty left soon: the rate stays the configured one and the level is never raised
        assert await store.follow_remaining(limits, res, requests_left(500, 0.01))
        state = await store.snapshot(limits)
        assert state.rpm_tokens_available < 1.0
        assert state.adjusted_rpm is None or state.adjusted_rpm <= 600.0
        headers = {"x-ratelimit-remaining-requests": "5000", "x-ratelimit-reset-requests": "1s"}
        assert remaining_quota(headers, "openai", limits, ceiling=CEILING).empty

    run(store, body)


BAD_HEADERS = [
    {"x-ratelimit-remaining-requests": "-5"},
    {"x-ratelimit-remaining-requests": "abc"},
    {"x-ratelimit-remaining-requests": "1e9"},
    {"x-ratelimit-remaining-requests": "99999999999999999999"},
    {"x-ratelimit-remaining-requests": "2", "x-ratelimit-reset-requests": "forever"},
    {"x-ratelimit-remaining-requests": "2", "x-ratelimit-reset-requests": "99999s"},  # beyond the ceiling
    {"x-ratelimit-remaining-tokens": "2.5.1", "x-ratelimit-reset-tokens": "1s"},
]


def test_malformed_headers_leave_the_buckets_unchanged(store, caplog):
    limits = adaptive_limits()

    async def body():
        res = await store.acquire(limits)
        before = await store.snapshot(limits)
        for headers in BAD_HEADERS:
            quota = remaining_quota(headers, "openai", limits, ceiling=CEILING)
            assert quota.empty, headers
            assert not await store.follow_remaining(limits, res, quota)
        # what reaches the store unchecked is checked again there
        for bad in (Remaining(-1, 1.0), Remaining(float("nan"), 1.0), Remaining(1, float("inf"))):
            assert not await store.follow_remaining(limits, res, RemainingQuota(requests=bad))
        after = await store.snapshot(limits)
        assert after.rpm_tokens_available >= before.rpm_tokens_available - 1e-6
        assert after.adjusted_rpm is None and after.adjusted_tpm is None

    with caplog.at_level(logging.WARNING, logger="gateway_engine.remaining"):
        run(store, body)
    logged = [r for r in caplog.records if getattr(r, "event", "") == "remaining_headers_ignored"]
    assert len(logged) <= 1  # once per provider per minute


def test_a_provider_that_is_not_adaptive_ignores_the_headers(store):
    limits = make_limits()

    async def body():
        res = await store.acquire(limits)
        assert not await store.follow_remaining(limits, res, requests_left(0, 5.0))
        assert (await store.try_acquire(limits)).granted

    run(store, body)


def test_turning_adaptive_off_returns_the_configured_rate_at_once(store):
    limits = adaptive_limits()

    async def body():
        res = await store.acquire(limits)
        assert await store.follow_remaining(limits, res, requests_left(0, 30.0))
        assert not (await store.try_acquire(limits)).granted
        off = replace(limits, adaptive=False)
        for _ in range(8):  # the level stayed clamped to 0: it refills at the configured 10/s again
            decision = await store.try_acquire(off)
            assert decision.granted or decision.wait_ms <= 100

    run(store, body)


def test_tokens_follow_their_own_headers(store):
    limits = adaptive_limits()

    async def body():
        res = await store.acquire(limits, 100)
        quota = RemainingQuota(tokens=Remaining(300, 1.0))
        assert await store.follow_remaining(limits, res, quota)
        state = await store.snapshot(limits)
        assert state.tpm_tokens_available <= 300.5
        assert state.adjusted_tpm == pytest.approx(18_000.0)  # 300 per second
        assert state.adjusted_rpm is None
        assert (await store.try_acquire(limits, 290)).granted
        assert not (await store.try_acquire(limits, 100)).granted

    run(store, body)


def test_the_configured_rate_returns_when_the_reset_passes_on_a_fake_clock(clocked_store, clock):
    limits = adaptive_limits()

    async def body():
        res = await clocked_store.acquire(limits)
        assert await clocked_store.follow_remaining(limits, res, requests_left(0, 2.0))
        denied = await clocked_store.try_acquire(limits)
        assert denied.wait_ms == 2100  # nothing left until the reset, then one token at 10/s
        clock.advance_ms(2099)
        assert not (await clocked_store.try_acquire(limits)).granted
        clock.advance_ms(1)
        assert (await clocked_store.try_acquire(limits)).granted
        assert (await clocked_store.snapshot(limits)).adjusted_rpm is None

    run(clocked_store, body)


def test_outside_use_is_estimated_from_the_headers_on_a_fake_clock(clocked_store, clock):
    limits = adaptive_limits()

    async def body():
        res = await clocked_store.acquire(limits)
        assert await clocked_store.follow_remaining(limits, res, requests_left(10, 0.0))  # full
        clock.advance(1.0)
        # a second later the provider has 5 left and the gateway sent nothing since: 5 went elsewhere
        assert await clocked_store.follow_remaining(limits, res, requests_left(5, 0.5))
        state = await clocked_store.snapshot(limits)
        assert state.outside_rpm == pytest.approx(300.0)  # 5 per second
        assert state.adjusted_rpm == pytest.approx(600.0)  # 5 left over 0.5 s: the configured 10/s

    run(clocked_store, body)


def test_two_redis_stores_share_one_adjusted_state(redis_sync):
    """Two processes' stores (each its own connection): what one learns, the other honours."""
    prefix = redis_prefix()
    one = RedisQuotaStore(settings.REDIS_URL, prefix=prefix)
    two = RedisQuotaStore(settings.REDIS_URL, prefix=prefix)
    limits = adaptive_limits()

    async def body():
        res = await one.acquire(limits)
        assert await one.follow_remaining(limits, res, requests_left(2, 5.0))
        granted = [(await two.try_acquire(limits)).granted for _ in range(4)]
        assert granted == [True, True, False, False]
        assert (await two.snapshot(limits)).adjusted_rpm == pytest.approx(24.0)
        await one.aclose()

    try:
        run(two, body)
    finally:
        keys = list(redis_sync.scan_iter(match=prefix + "*", count=1000))
        if keys:
            redis_sync.delete(*keys)


def test_headers_of_each_kind_are_read_as_published():
    limits = adaptive_limits(rpm=10_000, tpm=2_000_000)
    openai = {
        "x-ratelimit-remaining-requests": "59",
        "x-ratelimit-reset-requests": "6m0s",
        "x-ratelimit-remaining-tokens": "149984",
        "x-ratelimit-reset-tokens": "250ms",
    }
    quota = remaining_quota(openai, "openai", limits, ceiling=CEILING)
    assert quota.requests == Remaining(59, 360.0) and quota.tokens == Remaining(149984, 0.25)
    # Azure (no resets): requests count its current 1-10 s window (not followed), tokens are per minute
    azure = {"x-ratelimit-remaining-requests": "7", "x-ratelimit-remaining-tokens": "900"}
    quota = remaining_quota(azure, "azure_openai", limits, ceiling=CEILING)
    assert quota.requests is None and quota.tokens == Remaining(900, 60.0)
    # an OpenAI remaining without its reset says nothing about when: dropped
    assert remaining_quota({"x-ratelimit-remaining-requests": "59"}, "openai", limits, ceiling=CEILING).empty
    # every kind the provider file accepts has a header meaning; one whose meaning is unknown is never
    # followed, whatever it sends
    assert set(HEADER_SEMANTICS) == set(PROVIDER_KINDS)
    assert remaining_quota(openai, "mystery", limits, ceiling=CEILING).empty
    assert remaining_quota(openai, "gemini", limits, ceiling=CEILING).empty
    # anthropic's folded headers (wire/anthropic.py): tokens rounded to the nearest thousand
    anthropic = {"x-ratelimit-remaining-tokens": "12000", "x-ratelimit-reset-tokens": "2100-01-01T00:00:00Z"}
    assert remaining_quota(anthropic, "anthropic", limits, ceiling=CEILING).empty  # reset beyond the ceiling
    anthropic["x-ratelimit-reset-tokens"] = "1970-01-01T00:00:00Z"  # past: reset now
    assert remaining_quota(anthropic, "anthropic", limits, ceiling=CEILING).tokens == Remaining(11500, 0.0)
