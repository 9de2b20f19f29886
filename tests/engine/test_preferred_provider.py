"""The one preferred-provider draw (gateway_engine.routing.preferred_provider)."""

from __future__ import annotations

from gateway_engine.quota.types import ProviderLimits
from gateway_engine.routing import (
    ProviderConfig,
    RouteRule,
    candidates,
    draw_free_preference,
    preferred_provider,
    routing_table,
    stable_draw,
)


def provider(name, enabled=True):
    return ProviderConfig(
        name, "http://x", "m", ProviderLimits(name, 60, 6000, 1.0, 4, 30.0), enabled=enabled
    )


TABLE = routing_table(
    [provider("a"), provider("b"), provider("off", enabled=False)],
    [RouteRule("split", "a", weight=1), RouteRule("split", "b", weight=3), RouteRule("one", "a")],
)


def test_it_is_the_first_candidate_of_the_items_draw():
    for i in range(50):
        expected = candidates(TABLE, route="split", draw=stable_draw("batch", f"c{i}"))[0].name
        assert preferred_provider(TABLE, route="split", salt="batch", key=f"c{i}") == expected
    names = {preferred_provider(TABLE, route="split", salt="batch", key=f"c{i}") for i in range(50)}
    assert names == {"a", "b"}


def test_unroutable_is_empty():
    assert preferred_provider(TABLE, route="nope", salt="s", key="k") == ""
    assert preferred_provider(TABLE, provider="off", salt="s", key="k") == ""


def test_draw_free_preference():
    assert draw_free_preference(TABLE, route="one") == "a"
    assert draw_free_preference(TABLE, provider="b") == "b"
    assert draw_free_preference(TABLE, route="split") is None
    assert draw_free_preference(TABLE, route="nope") == ""
