"""The async engine against a real local HTTP provider server and the real quota stores."""

from __future__ import annotations

import asyncio
import statistics
import time
from collections import Counter, defaultdict
from datetime import datetime

import pytest
from django.conf import settings

from gateway_engine import CrossProviderBatcher, EngineOptions, RetryPolicy
from gateway_engine.breaker import BreakerConfig, LocalBreaker
from gateway_engine.breaker_redis import RedisBreaker
from gateway_engine.quota.local import LocalQuotaStore
from gateway_engine.quota.redis_buckets import RedisTokenBuckets
from gateway_engine.quota.redis_store import RedisQuotaStore
from gateway_engine.routing import ProviderConfig, RouteRule, routing_table
from tests.factories import work_item

from .provider_server import Reply, ok_reply

FAST_RETRY = EngineOptions(retry=RetryPolicy(base_seconds=0.05, cap_seconds=1.0), seed=1)


def provider(server, name, **kw):
    data = {
        "name": name,
        "base_url": server.url(name),
        "model": f"{name}-m",
        "rpm": 60_000,
        "tpm": 10_000_000,
        "max_concurrency": 8,
        "timeout_seconds": 5,
        "max_retries": 3,
    }
    data.update(kw)
    return ProviderConfig.from_dict(data)


class CountingBuckets(RedisTokenBuckets):
    """The real Redis buckets, counting the grants they hand out per provider (net of grants given
    back unused by an item that found no free concurrency slot)."""

    def __init__(self, conn, grants: Counter):
        super().__init__(conn)
        self.grants = grants

    async def try_acquire(self, limits, tokens=0, *split, **lane):  # split: the ITPM / OTPM amounts
        decision = await super().try_acquire(limits, tokens, *split, **lane)
        if decision.granted:
            self.grants[limits.name] += 1
        return decision

    async def give_back(self, limits, amounts, team=None):
        await super().give_back(limits, amounts, team)
        self.grants[limits.name] -= 1


class CountingRedisStore(RedisQuotaStore):
    """The real Redis store, counting the bucket grants it hands out per provider (CountingBuckets)."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.grants = Counter()
        self.buckets = CountingBuckets(self.connection, self.grants)


def redis_store(tag, **kw):
    return CountingRedisStore(settings.REDIS_URL, prefix=f"{settings.GATEWAY_REDIS_PREFIX}{tag}:", **kw)


def item(cid, provider=None, route=None, **params):
    """work_item with provider as the second positional argument (this file's calls)."""
    return work_item(cid, route=None if provider else route, provider=provider, **params)


def finish_times_until(batcher, store, items, prefix: str, count: int, timeout: float = 15.0) -> dict:
    """Run the batch until `count` items whose custom_id starts with `prefix` have finished (or
    `timeout` passes), cancel the rest, close the store; return {custom_id: seconds to finish}."""
    done_at: dict[str, float] = {}

    async def main():
        started = time.monotonic()

        async def on_result(index, result):
            done_at[result.custom_id] = time.monotonic() - started

        task = asyncio.create_task(batcher.abatch(items, on_result=on_result))
        deadline = time.monotonic() + timeout
        while sum(k.startswith(prefix) for k in done_at) < count and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        await store.aclose()

    asyncio.run(main())
    return done_at


def test_retry_policy_table(provider_server, redis_sync):
    statuses = [400, 401, 404, 422, 500, 502, 503, 504]
    for status in statuses:
        provider_server.behaviours[f"s{status}"] = lambda n, r, a, b, s=status: Reply(s)
    provider_server.behaviours["slow"] = lambda n, r, a, b: Reply(200, delay=3.0)
    provider_server.behaviours["limited"] = lambda n, r, a, b: (
        Reply(429, headers={"Retry-After": "2"}) if a == 1 else ok_reply()
    )
    configs = [provider(provider_server, f"s{s}") for s in statuses]
    configs += [provider(provider_server, "slow", timeout_seconds=1.0), provider(provider_server, "limited")]
    store = redis_store("table", global_max_in_flight=64)
    breaker = LocalBreaker(BreakerConfig(consecutive_failures=1000, min_requests=1000))
    options = EngineOptions(retry=RetryPolicy(base_seconds=0.2, cap_seconds=1.0))
    batcher = CrossProviderBatcher(routing_table(configs), store=store, breaker=breaker, options=options)
    items = [item(f"{c.name}-{i}", provider=c.name) for c in configs for i in range(4)]
    started = time.monotonic()
    results = batcher.batch(items)
    assert [r.custom_id for r in results] == [i["custom_id"] for i in items]  # input order
    by_id = {r.custom_id: r for r in results}

    for status in (400, 401, 404, 422):
        for i in range(4):
            r = by_id[f"s{status}-{i}"]
            assert (r.ok, r.attempts, r.error_type, r.error_status_code) == (False, 1, "client_error", status)
            assert r.error_message == f"simulated {status} from s{status}"
        assert provider_server.count(f"s{status}") == 4

    gaps = defaultdict(list)  # retry index -> gaps between attempts of the 5xx providers (s)
    for name in [f"s{s}" for s in (500, 502, 503, 504)] + ["slow"]:
        for i in range(4):
            r = by_id[f"{name}-{i}"]
            assert (r.ok, r.attempts) == (False, 4), (name, r)
            assert r.error_type == ("timeout" if name == "slow" else "server_error")
            hits = provider_server.hits_for(f"{name}-{i}")
            assert len(hits) == 4
            starts = [datetime.fromisoformat(a["at"]) for a in r.attempt_log]  # engine-side send starts
            for k in range(3):
                gap = hits[k + 1].at - hits[k].at
                ceiling = 0.2 * 2**k  # full jitter: uniform(0, base * 2^k)
                if name == "slow":  # each timed-out attempt lasted 1 s before the wait
                    # lower bound on the engine's own clock: the server may record an arrival late
                    # when its loop is busy (it shares the process), which shortens the server-side gap
                    client_gap = (starts[k + 1] - starts[k]).total_seconds()
                    assert client_gap >= 1.0 - 0.002, (name, k, client_gap)
                    assert gap <= 1.0 + ceiling + 0.6, (name, k, gap)
                else:
                    assert gap <= ceiling + 0.6, (name, k, gap)
                    gaps[k].append(gap)
    assert statistics.mean(gaps[2]) > statistics.mean(gaps[0]) + 0.1  # growing
    assert len({round(g, 3) for g in gaps[2]}) > 8  # jittered, not a fixed schedule

    for i in range(4):
        r = by_id[f"limited-{i}"]
        assert r.ok and r.attempts == 2
        first, second = provider_server.hits_for(f"limited-{i}")
        assert second.at - first.at >= 2.0
    assert time.monotonic() - started < 30

    # every attempt (retries included) took a bucket token
    assert store.grants == provider_server.by_provider()
    stats = batcher.last_stats
    for name, count in provider_server.by_provider().items():
        assert stats["providers"][name]["request_count"] == count
    assert stats["providers"]["limited"]["rate_limited_count"] == 4
    assert stats["providers"]["slow"]["errors_by_class"]["timeout"] == 16
    assert stats["providers"]["s503"]["retry_count"] == 12


def test_token_before_lease_empty_bucket_at_a_does_not_delay_b(provider_server, redis_sync):
    a = provider(
        provider_server, "pa", rpm=6, burst_seconds=10, max_concurrency=1
    )  # 1 token, then 1 per 10 s
    b = provider(provider_server, "pb")
    provider_server.behaviours["pb"] = lambda n, r, at, body: ok_reply(0.02)
    store = redis_store("tbl", global_max_in_flight=2)  # tiny global cap on purpose
    batcher = CrossProviderBatcher(routing_table([a, b]), store=store, options=FAST_RETRY)
    items = [item(f"a{i}", provider="pa") for i in range(6)] + [
        item(f"b{i}", provider="pb") for i in range(40)
    ]
    done_at = finish_times_until(batcher, store, items, "b", 40)
    b_done = [t for k, t in done_at.items() if k.startswith("b")]
    assert len(b_done) == 40
    assert max(b_done) < 5.0  # B never waited for A's bucket (A's next token is 10 s away)
    assert provider_server.count("pa") == 1  # A sent only what its bucket allowed
    assert provider_server.count("pb") == 40
    assert store.global_in_flight == 0  # cancelling the run returned every in-flight slot


def test_fallback_when_primary_always_503_and_stats_match_the_server(provider_server, redis_sync):
    provider_server.behaviours["primary"] = lambda n, r, a, b: Reply(
        503, usage={"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}
    )
    configs = [provider(provider_server, "primary", max_retries=2), provider(provider_server, "secondary")]
    table = routing_table(configs, [RouteRule("intent", "primary", 0), RouteRule("intent", "secondary", 1)])
    breaker = RedisBreaker(
        settings.REDIS_URL,
        prefix=settings.GATEWAY_REDIS_PREFIX + "fb:",
        config=BreakerConfig(consecutive_failures=5, cooldown_seconds=30),
    )
    store = redis_store("fb")
    batcher = CrossProviderBatcher(table, store=store, breaker=breaker, options=FAST_RETRY)
    results = batcher.batch([item(f"i{i}", route="intent", max_tokens=20) for i in range(30)])
    assert all(r.ok and r.provider == "secondary" for r in results)
    stats = batcher.last_stats
    assert set(stats["providers"]) == {"primary", "secondary"}
    served = provider_server.by_provider()
    assert {n: p["request_count"] for n, p in stats["providers"].items()} == dict(served)
    assert stats["providers"]["secondary"]["request_count"] == 30
    assert stats["providers"]["primary"]["error_count"] == served["primary"]
    # the breaker opened after 5 consecutive failures: later items went straight to the secondary
    assert served["primary"] < 30 * 3
    assert breaker.snapshot_sync(["primary"])["primary"].state == "open"
    # 503 answers that reported usage were billed but unused
    assert stats["token_usage"]["retry_extra_tokens"] == 7 * served["primary"]
    assert stats["success_count"] == 30 and stats["failed_count"] == 0
    assert sum(r.retry_extra_tokens for r in results) == 7 * served["primary"]
    assert stats["token_usage"]["prompt_tokens"] == sum(r.prompt_tokens for r in results) > 0


def test_slow_item_never_holds_the_rest(provider_server):
    provider_server.behaviours["mix"] = lambda n, rid, a, b: Reply(200, delay=3.0 if rid == "slow" else 0.01)
    batcher = CrossProviderBatcher(
        routing_table([provider(provider_server, "mix", timeout_seconds=0.5, max_retries=1)]),
        options=FAST_RETRY,
        global_max_in_flight=4,
    )
    done_at = {}

    async def main():
        started = time.monotonic()

        async def on_result(index, result):
            done_at[result.custom_id] = time.monotonic() - started

        return await batcher.abatch(
            [item("slow", provider="mix")] + [item(f"q{i}", provider="mix") for i in range(30)],
            on_result=on_result,
        )

    results = asyncio.run(main())
    slow = results[0]
    assert (slow.ok, slow.error_type, slow.attempts) == (False, "timeout", 2)
    assert all(r.ok for r in results[1:])
    assert max(t for k, t in done_at.items() if k != "slow") < 1.0
    assert all(e["error_type"] == "timeout" and e["latency_ms"] >= 450 for e in slow.attempt_log)


def test_plain_python_runnable_surface(provider_server):
    config = {
        "providers": [
            {
                "name": "alpha",
                "base_url": provider_server.url("alpha"),
                "model": "a",
                "rpm": 6000,
                "tpm": 10**6,
                "max_concurrency": 4,
            },
            {
                "name": "beta",
                "base_url": provider_server.url("beta"),
                "model": "b",
                "rpm": 6000,
                "tpm": 10**6,
                "max_concurrency": 4,
            },
        ],
        "routes": [
            {"route": "r", "provider": "alpha", "weight": 1},
            {"route": "r", "provider": "beta", "weight": 1},
        ],
    }
    batcher = CrossProviderBatcher.from_config(config, global_max_in_flight=8)
    items = [{"custom_id": str(i), "route": "r", "query": f"q{i}"} for i in range(200)]
    results = batcher.batch(items)
    assert [r.custom_id for r in results] == [str(i) for i in range(200)]
    assert all(r.ok for r in results)
    assert batcher.store.global_in_flight == 0
    split = Counter(r.provider for r in results)
    assert 60 < split["alpha"] < 140 and split["alpha"] + split["beta"] == 200
    assert results[5].as_result()["usage"]["total_tokens"] > 0
    assert results[5].response["choices"][0]["message"]["content"] == "answer to 5"
    with pytest.raises(ValueError, match=r"items\[0\]: exactly one of route/provider"):
        batcher.batch([{"custom_id": "x", "query": "q"}])


def test_unroutable_and_impossible_items_fail_clearly(provider_server):
    tiny = provider(provider_server, "tiny", tpm=60, burst_seconds=5)  # TPM bucket holds 5 tokens
    batcher = CrossProviderBatcher(routing_table([tiny]), store=LocalQuotaStore(global_max_in_flight=4))
    results = batcher.batch([item("big", provider="tiny", max_tokens=500), item("lost", route="nowhere")])
    assert (results[0].error_type, results[0].attempts) == ("quota_impossible", 0)
    assert "TPM bucket holds at most 5" in results[0].error_message
    assert (results[1].error_type, results[1].error_message) == (
        "no_provider",
        "route: 'nowhere' is not a known route",
    )
    assert provider_server.count() == 0


def test_short_items_do_not_starve_behind_long_ones(provider_server, redis_sync):
    # 1,000 tokens/s, bucket of 5,000: eight 2,000-token items need ~11 s beyond the burst
    cfg = provider(provider_server, "mixed", tpm=60_000, burst_seconds=5, max_concurrency=4)
    store = redis_store("mixed")
    batcher = CrossProviderBatcher(routing_table([cfg]), store=store, options=FAST_RETRY)
    long_items = [item(f"long{i}", provider="mixed", max_tokens=2000) for i in range(8)]
    short_items = [item(f"short{i}", provider="mixed", max_tokens=10) for i in range(40)]
    done_at = finish_times_until(batcher, store, long_items + short_items, "short", 40)
    shorts = [t for k, t in done_at.items() if k.startswith("short")]
    assert len(shorts) == 40
    assert max(shorts) < 4.0  # submitted after the long ones, done long before their tokens exist
    assert sum(k.startswith("long") for k in done_at) < 8


def test_no_fallback_open_breaker_fails_clearly(provider_server):
    provider_server.behaviours["down"] = lambda n, r, a, b: Reply(503)
    breaker = LocalBreaker(BreakerConfig(consecutive_failures=2, cooldown_seconds=30))
    options = EngineOptions(retry=RetryPolicy(0.01, 0.05), max_breaker_wait_seconds=0.5, seed=3)
    batcher = CrossProviderBatcher(
        routing_table([provider(provider_server, "down", max_retries=5)]),
        breaker=breaker,
        options=options,
        global_max_in_flight=1,
    )
    results = batcher.batch([item(f"d{i}", provider="down") for i in range(5)])
    assert all(not r.ok for r in results)
    # the five first attempts had their permits before anything failed; after the 2nd failure the breaker
    # was open, so nothing more was sent although max_retries=5 (one retry may slip in between the 1st
    # and the 2nd failure); each item then waited for the open breaker and failed clearly
    sent = provider_server.count("down")
    assert sent in (5, 6)
    assert sum(r.attempts for r in results) == sent
    # every item was sent once: it keeps its last error (server_error 503), and says it was not retried
    # because the breaker stayed open, and how long it really waited
    assert all((r.error_type, r.error_status_code) == ("server_error", 503) for r in results)
    for r in results:
        assert r.error_message.startswith(
            "simulated 503 from down; not retried: circuit breaker open for down"
        )
        waited = float(r.error_message.split("waited ")[1].split(" s")[0])
        assert waited >= 0.5 and "(limit 0.5 s)" in r.error_message
