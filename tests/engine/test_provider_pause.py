"""The engine acts on the provider-wide failure semantics (issue #21), against a real local HTTP server
and the real Redis quota store:

* billing exhausted (an OpenAI 429 ``insufficient_quota``): the provider is paused for every worker,
  never retried there, items fall back at once; in-flight items sent at most once there; a second run
  on the same Redis never sends to it; an item with no other candidate ends ``provider_quota_exhausted``
  without a send;
* a Gemini per-day quota: paused until the next midnight America/Los_Angeles, the answer's short
  ``retryDelay`` never penalizes the bucket, items fall back at once;
* overloaded (an Anthropic 529): retried with backoff, the breaker opens and items fall back, the bucket
  is never penalized nor the provider paused, stats count it ``overloaded`` and 0 × 429.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections import Counter

from django.conf import settings

from gateway_engine import CrossProviderBatcher, EngineOptions, RetryPolicy
from gateway_engine.breaker import BreakerConfig, LocalBreaker
from gateway_engine.quota.redis_store import RedisQuotaStore
from gateway_engine.retry import ErrorType
from gateway_engine.routing import RouteRule, routing_table
from gateway_engine.stats import build_stats
from tests.factories import work_item

from .failure_wire import (
    ANTHROPIC_OVERLOADED,
    GEMINI_PER_DAY,
    INSUFFICIENT_QUOTA,
    kind_for,
    next_la_midnight,
)
from .provider_server import Reply, ok_reply
from .test_batcher import provider

FAST = EngineOptions(retry=RetryPolicy(base_seconds=0.02, cap_seconds=0.1), seed=3)


class PauseRecorder:
    """An observer that keeps the provider pauses it is told about."""

    def __init__(self) -> None:
        self.pauses: list[tuple[str, str, float | None, str]] = []

    def on_provider_paused(self, provider, reason, until_epoch, message):
        self.pauses.append((provider, reason, until_epoch, message))

    def __getattr__(self, name):  # every other observer call: nothing to keep
        return lambda *a, **kw: None


class PenaltyCountingStore(RedisQuotaStore):
    """The real Redis store, keeping every bucket penalty (a 429's pause of the bucket) asked of it."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.penalized: list[tuple[str, float]] = []

    async def penalize(self, limits, retry_after_seconds):
        self.penalized.append((limits.name, retry_after_seconds))
        return await super().penalize(limits, retry_after_seconds)


def store_for(tag: str) -> PenaltyCountingStore:
    return PenaltyCountingStore(settings.REDIS_URL, prefix=f"{settings.GATEWAY_REDIS_PREFIX}pause-{tag}:")


def run(configs, items, *, tag, breaker=None, observer=None, rules=(), store=None):
    """One batcher run on a fresh store handle of ``tag``'s Redis prefix; (results by custom_id, each
    provider's bucket snapshot and pause read afterwards from the same store, the penalties asked)."""
    store = store or store_for(tag)
    table = routing_table(configs, rules)
    batcher = CrossProviderBatcher(
        table, store=store, breaker=breaker or LocalBreaker(), options=FAST, observer=observer
    )

    async def main():
        try:
            results = await batcher.abatch(items)
            states = {c.name: await store.snapshot(c.limits) for c in configs}
            pauses = {c.name: await store.provider_pause(c.name) for c in configs}
            return results, states, pauses
        finally:
            await store.aclose()

    results, states, pauses = asyncio.run(main())
    states["penalized"] = store.penalized
    return {r.custom_id: r for r in results}, states, pauses


def routed(server, first, first_kind, *, rules_route="r", **first_kw):
    """``first`` (kind ``first_kind``, priority 0) with an OpenAI fallback ``good`` (priority 1)."""
    bad = dataclasses.replace(provider(server, first, **first_kw), kind=first_kind)
    good = provider(server, "good")
    rules = [RouteRule(rules_route, first, priority=0), RouteRule(rules_route, "good", priority=1)]
    return [bad, good], rules


def per_rid(server, name) -> Counter:
    return Counter(h.request_id for h in server.hits if h.provider == name)


def test_billing_exhausted_pauses_the_provider_and_every_item_falls_back(
    provider_server, redis_sync, monkeypatch
):
    kind = kind_for(monkeypatch, "openai", 429, INSUFFICIENT_QUOTA)
    provider_server.behaviours["broke"] = lambda n, r, a, b: Reply(
        429, delay=0.2, body=INSUFFICIENT_QUOTA, headers={"retry-after": "20"}
    )
    configs, rules = routed(provider_server, "broke", kind, max_concurrency=4, max_retries=3)
    observer = PauseRecorder()
    items = [work_item(f"b{i}", route="r") for i in range(30)]
    results, states, pauses = run(configs, items, tag="billing", observer=observer, rules=rules)

    assert {r.status for r in results.values()} == {"succeeded"} and len(results) == 30
    assert {r.provider for r in results.values()} == {"good"}
    sent = per_rid(provider_server, "broke")
    # only the items in flight when the first answer came (≤ max_concurrency) reached it, once each
    assert 1 <= sum(sent.values()) <= 4 and set(sent.values()) == {1}
    for cid in sent:
        log = results[cid].attempt_log
        assert [(e["provider"], e["error_type"], e["used"]) for e in log] == [
            ("broke", ErrorType.PROVIDER_QUOTA_EXHAUSTED, False),
            ("good", "", True),
        ]
    assert all(r.attempts == 1 for cid, r in results.items() if cid not in sent)
    pause = pauses["broke"]
    assert pause is not None and pause.reason == "billing" and pause.until_epoch is None
    assert states["broke"].paused_until_ms == 0 and states["penalized"] == []  # no bucket penalty
    assert {p[:3] for p in observer.pauses} == {("broke", "billing", None)}
    assert len(observer.pauses) == sum(sent.values())

    # a second run (a new store handle on the same Redis, as another worker) never sends there; an
    # item that can go nowhere else ends provider_quota_exhausted without a send
    before = provider_server.count("broke")
    again = [work_item(f"c{i}", route="r") for i in range(10)] + [work_item("only", provider="broke")]
    results, _, _ = run(configs, again, tag="billing", rules=rules)
    assert provider_server.count("broke") == before
    assert all(results[f"c{i}"].ok and results[f"c{i}"].attempts == 1 for i in range(10))
    only = results["only"]
    assert (only.status, only.error_type, only.error_status_code) == (
        "failed",
        ErrorType.PROVIDER_QUOTA_EXHAUSTED,
        None,
    )
    assert only.attempts == 0 and only.attempt_log == []
    assert "broke" in only.error_message and "paused" in only.error_message


def test_billing_exhausted_with_no_fallback_ends_the_item_with_that_error(
    provider_server, redis_sync, monkeypatch
):
    kind = kind_for(monkeypatch, "openai", 429, INSUFFICIENT_QUOTA)
    provider_server.behaviours["alone"] = lambda n, r, a, b: Reply(429, body=INSUFFICIENT_QUOTA)
    alone = dataclasses.replace(provider(provider_server, "alone", max_concurrency=1), kind=kind)
    results, _, pauses = run([alone], [work_item(f"a{i}", provider="alone") for i in range(5)], tag="alone")

    assert provider_server.count("alone") == 1  # the first answer paused it; the others never went
    first = next(r for r in results.values() if r.attempts)
    assert (first.error_type, first.error_status_code, first.attempts) == (
        ErrorType.PROVIDER_QUOTA_EXHAUSTED,
        429,
        1,
    )
    rest = [r for r in results.values() if not r.attempts]
    assert len(rest) == 4
    assert {(r.error_type, r.error_status_code) for r in rest} == {(ErrorType.PROVIDER_QUOTA_EXHAUSTED, None)}
    assert pauses["alone"] is not None


def test_gemini_per_day_quota_pauses_until_la_midnight_and_items_fall_back_at_once(
    provider_server, redis_sync, monkeypatch
):
    kind = kind_for(monkeypatch, "gemini", 429, GEMINI_PER_DAY)
    provider_server.behaviours["daily"] = lambda n, r, a, b: Reply(
        429, delay=0.1, body=GEMINI_PER_DAY, headers={"retry-after": "20"}
    )
    configs, rules = routed(provider_server, "daily", kind, max_concurrency=3, max_retries=3)
    items = [work_item(f"d{i}", route="r") for i in range(20)]
    results, states, pauses = run(configs, items, tag="daily", rules=rules)

    assert all(r.ok and r.provider == "good" for r in results.values()) and len(results) == 20
    sent = per_rid(provider_server, "daily")
    assert 1 <= sum(sent.values()) <= 3 and set(sent.values()) == {1}  # never retried there
    for cid in sent:
        assert [(e["provider"], e["error_type"]) for e in results[cid].attempt_log] == [
            ("daily", ErrorType.RATE_LIMITED),
            ("good", ""),
        ]
    pause = pauses["daily"]
    assert pause is not None and pause.reason == "per_day_quota"
    assert abs(pause.until_epoch - next_la_midnight()) < 5
    # the answer's 20 s retryDelay is not a bucket penalty: waiting seconds will not clear a day's quota
    assert states["daily"].paused_until_ms == 0 and states["penalized"] == []


def test_overloaded_is_retried_opens_the_breaker_and_falls_back_without_touching_the_bucket(
    provider_server, redis_sync, monkeypatch
):
    kind = kind_for(monkeypatch, "anthropic", 529, ANTHROPIC_OVERLOADED)
    provider_server.behaviours["busy"] = lambda n, r, a, b: Reply(
        529, delay=0.02, body=ANTHROPIC_OVERLOADED, headers={"retry-after": "30"}
    )
    configs, rules = routed(provider_server, "busy", kind, max_concurrency=2, max_retries=2)
    # opens after more failures in a row than the 8 items the run serves at once per preferred provider:
    # before it opens some item must have been retried there (an item leaves only when its retries
    # are spent or the breaker is open)
    breaker = LocalBreaker(BreakerConfig(consecutive_failures=10, cooldown_seconds=30))
    items = [work_item(f"o{i}", route="r") for i in range(24)]
    results, states, pauses = run(configs, items, tag="overloaded", breaker=breaker, rules=rules)

    assert all(r.ok and r.provider == "good" for r in results.values()) and len(results) == 24
    sent = per_rid(provider_server, "busy")
    assert max(sent.values()) >= 2  # retried (with backoff) on the overloaded provider
    # the breaker opened: most items never reached it
    assert sum(sent.values()) < 24 and len(sent) < 24
    assert breaker.snapshot_sync(["busy"])["busy"].opened_count >= 1
    assert pauses["busy"] is None  # not a pause ...
    # ... and not a 429: the bucket was never penalized (its Retry-After: 30 not believed either)
    assert states["busy"].paused_until_ms == 0 and states["penalized"] == []
    stats = build_stats("b", results.values())["providers"]["busy"]
    assert stats["errors_by_class"]["overloaded"] == sum(sent.values())
    assert stats["errors_by_class"]["429"] == 0 and stats["rate_limited_count"] == 0
    assert all(
        e["error_type"] == ErrorType.OVERLOADED
        for r in results.values()
        for e in r.attempt_log
        if e["provider"] == "busy"
    )


def test_a_plain_429_still_penalizes_the_bucket(provider_server, redis_sync):
    """The control: a rate-limit 429 with a Retry-After is this account's rate and pauses the bucket."""
    provider_server.behaviours["rl"] = lambda n, r, a, b: (
        Reply(429, headers={"Retry-After": "1"}) if a == 1 else ok_reply()
    )
    rl = provider(provider_server, "rl", max_concurrency=1)
    results, states, pauses = run([rl], [work_item("x", provider="rl")], tag="plain429")
    assert results["x"].ok and results["x"].attempts == 2
    assert states["penalized"] == [("rl", 1.0)] and pauses["rl"] is None


class PauseAtReleaseStore(PenaltyCountingStore):
    """Notes, as each provider lease goes back, whether the provider is paused by then."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.paused_at_release: list[tuple[str, bool]] = []

    def release_lease(self, limits, lease):
        reply = super().release_lease(limits, lease)

        async def noted():
            await reply
            self.paused_at_release.append((limits.name, await self.provider_pause(limits.name) is not None))

        return noted()


def test_the_pause_an_answer_asks_for_is_in_the_store_before_its_lease_goes_back(
    provider_server, redis_sync, monkeypatch
):
    """The billing answer's pause is applied before its lease is released: a worker polling for that
    lease (another process: another connection) can never be granted it between the two and send once
    more to the broke provider. (Before, the lease went back first, then the pause was recorded.)"""
    kind = kind_for(monkeypatch, "openai", 429, INSUFFICIENT_QUOTA)
    provider_server.behaviours["broke1"] = lambda n, r, a, b: Reply(429, delay=0.05, body=INSUFFICIENT_QUOTA)
    configs, rules = routed(provider_server, "broke1", kind, max_concurrency=1, max_retries=3)
    store = PauseAtReleaseStore(settings.REDIS_URL, prefix=f"{settings.GATEWAY_REDIS_PREFIX}pause-first:")
    items = [work_item(f"p{i}", route="r") for i in range(12)]
    results, _, pauses = run(configs, items, tag="pause-first", rules=rules, store=store)
    assert {r.provider for r in results.values()} == {"good"} and all(r.ok for r in results.values())
    assert sum(per_rid(provider_server, "broke1").values()) == 1  # the one in flight when it answered
    assert pauses["broke1"] is not None and pauses["broke1"].reason == "billing"
    assert [paused for name, paused in store.paused_at_release if name == "broke1"] == [True]
