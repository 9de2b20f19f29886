"""Routing's pure half of a capacity move: which peers share a first tier (``first_tier_peers``) and
the candidate order of a moved item (``prefer``: the claiming provider first, the rest unchanged)."""

from __future__ import annotations

from gateway_engine.quota.types import ProviderLimits
from gateway_engine.routing import (
    ProviderConfig,
    RouteRule,
    candidates,
    first_tier_peers,
    preferred_provider,
    routing_table,
)


def provider(name: str, enabled: bool = True) -> ProviderConfig:
    return ProviderConfig(
        name,
        f"http://127.0.0.1:9/{name}/v1",
        "m",
        ProviderLimits(name, 60, 10_000, 1.0, 4, 30.0),
        enabled=enabled,
    )


def table(*rules: RouteRule, disabled: tuple[str, ...] = ()):
    names = sorted({r.provider for r in rules} | {"solo"})
    return routing_table([provider(n, n not in disabled) for n in names], rules)


SUMMARY = (
    RouteRule("summary", "gemini", priority=0, weight=1),
    RouteRule("summary", "azure", priority=0, weight=1),
    RouteRule("summary", "backup", priority=1, weight=1),
    RouteRule("intent", "gemini", priority=0, weight=3),
    RouteRule("intent", "azure", priority=1, weight=1),
)


def test_peers_are_the_providers_of_a_shared_first_tier():
    t = table(*SUMMARY)
    assert first_tier_peers(t, "gemini") == {"azure": ("summary",)}  # intent: azure is a fallback there
    assert first_tier_peers(t, "azure") == {"gemini": ("summary",)}
    assert first_tier_peers(t, "backup") == {}  # priority 1 behind a live first tier
    assert first_tier_peers(t, "solo") == {}  # in no route


def test_a_disabled_provider_neither_moves_nor_lifts_a_tier():
    t = table(*SUMMARY, disabled=("azure",))
    assert first_tier_peers(t, "azure") == {}
    assert first_tier_peers(t, "gemini") == {}  # alone in summary's first tier; intent's azure is off
    off_rule = (RouteRule("summary", "gemini", enabled=False), *SUMMARY[1:])
    # with gemini's summary rule off, summary's first tier is azure alone
    assert first_tier_peers(table(*off_rule), "azure") == {}


def test_prefer_puts_the_claiming_peer_first_and_keeps_the_rest():
    t = table(*SUMMARY)
    for draw in (0.1, 0.9):
        drawn = [c.name for c in candidates(t, route="summary", draw=draw)]
        moved = [c.name for c in candidates(t, route="summary", draw=draw, prefer="azure")]
        assert moved[0] == "azure" and moved[1:] == [n for n in drawn if n != "azure"]
        assert moved[-1] == "backup"
    # a provider outside the first tier is never preferred: the draw's order stands
    drawn = [c.name for c in candidates(t, route="summary", draw=0.1)]
    assert [c.name for c in candidates(t, route="summary", draw=0.1, prefer="backup")] == drawn
    assert [c.name for c in candidates(t, route="summary", draw=0.1, prefer="nobody")] == drawn


def test_the_engine_queue_follows_the_move():
    t = table(*SUMMARY)
    keys = [f"k{i}" for i in range(40)]
    drawn = {k: preferred_provider(t, route="summary", salt="b", key=k) for k in keys}
    assert set(drawn.values()) == {"gemini", "azure"}  # the draw splits them
    assert {preferred_provider(t, route="summary", salt="b", key=k, prefer="azure") for k in keys} == {
        "azure"
    }
