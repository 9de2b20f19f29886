from collections import Counter

import pytest

from gateway_engine.routing import (
    ProviderConfig,
    RouteRule,
    RoutingError,
    candidates,
    routing_table,
    routing_table_from_config,
    stable_draw,
)
from providers.adapters import routing_table_from_models


def cfg(name, enabled=True):
    return ProviderConfig.from_dict(
        {
            "name": name,
            "base_url": f"http://x/{name}",
            "model": "m",
            "rpm": 60,
            "tpm": 1000,
            "max_concurrency": 2,
            "enabled": enabled,
        }
    )


def names(providers):
    return [p.name for p in providers]


def test_priority_order_and_fallbacks():
    table = routing_table(
        [cfg("a"), cfg("b"), cfg("c")],
        [
            RouteRule("intent", "c", priority=2),
            RouteRule("intent", "a", priority=0),
            RouteRule("intent", "b", 1),
        ],
    )
    assert names(candidates(table, route="intent")) == ["a", "b", "c"]


def test_weight_split_within_priority():
    table = routing_table(
        [cfg("a"), cfg("b"), cfg("z")],
        [RouteRule("r", "a", 0, weight=3), RouteRule("r", "b", 0, weight=1), RouteRule("r", "z", 1)],
    )
    firsts = Counter(
        names(candidates(table, route="r", draw=stable_draw("batch", i)))[0] for i in range(4000)
    )
    assert set(firsts) == {"a", "b"}
    assert 0.70 < firsts["a"] / 4000 < 0.80
    # the other provider of the same priority comes next, then the lower priority
    order = names(candidates(table, route="r", draw=0.9))
    assert order == ["b", "a", "z"]
    assert names(candidates(table, route="r", draw=0.1)) == ["a", "b", "z"]


def test_explicit_provider_skips_routing_and_disabled_are_skipped():
    table = routing_table(
        [cfg("a"), cfg("off", enabled=False)], [RouteRule("r", "off", 0), RouteRule("r", "a", 1)]
    )
    assert names(candidates(table, provider="a", route="r")) == ["a"]
    assert names(candidates(table, route="r")) == ["a"]
    with pytest.raises(RoutingError, match="provider 'off' is disabled"):
        candidates(table, provider="off")
    with pytest.raises(RoutingError, match="unknown provider"):
        candidates(table, provider="nope")
    with pytest.raises(RoutingError, match="not a known route"):
        candidates(table, route="nope")
    disabled_rule = routing_table([cfg("a")], [RouteRule("r", "a", enabled=False)])
    with pytest.raises(RoutingError, match="has no enabled provider"):
        candidates(disabled_rule, route="r")


def test_from_config_file_shape():
    table = routing_table_from_config(
        {
            "providers": [
                {
                    "name": "alpha",
                    "base_url": "http://h/v1",
                    "model": "m",
                    "rpm": 60,
                    "tpm": 100,
                    "max_concurrency": 6,
                    "timeout_seconds": 7,
                    "max_retries": 2,
                }
            ],
            "routes": [{"route": "intent", "provider": "alpha"}],
        }
    )
    alpha = table.providers["alpha"]
    assert (alpha.limits.rpm, alpha.timeout_seconds, alpha.max_retries, alpha.limits.burst_seconds) == (
        60,
        7.0,
        2,
        5.0,
    )
    assert names(candidates(table, route="intent")) == ["alpha"]


@pytest.mark.django_db
def test_from_models(make_provider, make_route):
    a, b = make_provider("alpha", max_retries=5), make_provider("beta")
    make_route("intent", a, priority=1)
    make_route("intent", b, priority=0)
    from providers.models import Provider, RoutingRule

    table = routing_table_from_models(Provider.objects.all(), RoutingRule.objects.select_related("provider"))
    assert names(candidates(table, route="intent")) == ["beta", "alpha"]
    assert table.providers["alpha"].max_retries == 5
