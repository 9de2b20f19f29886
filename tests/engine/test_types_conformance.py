"""The concrete classes satisfy the engine's seams (gateway_engine.protocols).

Each function below assigns concrete instances to Protocol-typed names; mypy checks this module
strictly (``[tool.mypy] files``; ``make lint`` and tests/test_lint_types.py run it), so a class that
drifts from its Protocol — a renamed method, a changed signature or return type — fails the type
check. The tests run the same assignments and check each member exists at run time."""

from __future__ import annotations

import time
from typing import Any

from batches.execution.runner import EngineThread
from gateway_engine import CrossProviderBatcher, ItemFeed
from gateway_engine.breaker import LocalBreaker
from gateway_engine.breaker_redis import RedisBreaker
from gateway_engine.journal import NullJournal, RedisAttemptJournal
from gateway_engine.protocols import (
    AttemptJournal,
    Breaker,
    Clock,
    ItemSource,
    LimitsProvider,
    QuotaStore,
    ResultSink,
)
from gateway_engine.quota.local import LocalQuotaStore
from gateway_engine.quota.redis_store import RedisQuotaStore
from gateway_engine.routing import routing_table
from providers.limits.source import LimitsSource
from tests.clock import FakeClock

REDIS_URL = "redis://127.0.0.1:6379/0"  # nothing connects: constructing a Redis store or breaker is local


def quota_stores() -> list[QuotaStore]:
    local: QuotaStore = LocalQuotaStore()
    shared: QuotaStore = RedisQuotaStore(REDIS_URL, prefix="conformance:")
    return [local, shared]


def breakers() -> list[Breaker]:
    local: Breaker = LocalBreaker()
    shared: Breaker = RedisBreaker(REDIS_URL, prefix="conformance:")
    return [local, shared]


def journals() -> list[AttemptJournal]:
    null: AttemptJournal = NullJournal()
    shared: AttemptJournal = RedisAttemptJournal(RedisQuotaStore(REDIS_URL, prefix="conformance:"), "owner")
    return [null, shared]


def limits_providers() -> list[LimitsProvider]:
    source: LimitsProvider = LimitsSource(
        store=LocalQuotaStore(), refresh_seconds=1.0, loader=dict, team_loader=None, listen=False
    )
    return [source]


def clocks() -> list[Clock]:
    monotonic: Clock = time.monotonic
    fake: Clock = FakeClock()
    return [monotonic, fake]


def item_sources() -> list[ItemSource]:
    feed: ItemSource = ItemFeed()
    return [feed]


def result_sinks() -> list[ResultSink]:
    batcher = CrossProviderBatcher(routing_table([]))
    engine = EngineThread(batcher, [], name="conformance")
    sink: ResultSink = engine._on_result
    return [sink]


def members(protocol: type[Any]) -> list[str]:
    """The names a Protocol requires (its own and its bases', not object's or Protocol's)."""
    names: set[str] = set()
    for klass in protocol.__mro__:
        if klass.__module__ == "gateway_engine.protocols":
            names |= {n for n in vars(klass) if not n.startswith("_")} | set(
                getattr(klass, "__annotations__", {})
            )
    return sorted(names)


def test_quota_stores_have_every_member_the_engine_calls() -> None:
    required = members(QuotaStore)
    assert {"acquire", "try_lease", "try_global_slot", "reconcile", "reserve_budget"} <= set(required)
    for store in quota_stores():
        assert [n for n in required if not hasattr(store, n)] == [], type(store).__name__


def test_breakers_have_every_member_the_engine_calls() -> None:
    required = members(Breaker)
    assert {"allow", "record", "aclose"} <= set(required)
    for breaker in breakers():
        assert [n for n in required if not hasattr(breaker, n)] == [], type(breaker).__name__


def test_journals_have_every_member_the_engine_calls() -> None:
    required = members(AttemptJournal)
    assert {"before_send", "sent"} <= set(required)
    for journal in journals():
        assert [n for n in required if not hasattr(journal, n)] == [], type(journal).__name__


def test_limits_source_has_every_member_the_engine_calls() -> None:
    required = members(LimitsProvider)
    assert {"get", "team", "peek", "peek_team", "budget_seed"} <= set(required)
    for source in limits_providers():
        try:
            assert [n for n in required if not hasattr(source, n)] == []
        finally:
            assert isinstance(source, LimitsSource)
            source.close()


def test_clocks_feeds_and_sinks_are_what_the_engine_expects() -> None:
    assert all(isinstance(clock(), float) for clock in clocks())
    assert all(hasattr(source, "__aiter__") for source in item_sources())
    assert all(callable(sink) for sink in result_sinks())
