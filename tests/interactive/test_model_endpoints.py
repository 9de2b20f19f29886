"""Which endpoints each model of ``GET /v1/models`` serves (issue #39, interactive.targets.model_endpoints):
from the provider kinds' capabilities, a route only what every provider it reaches serves."""

from __future__ import annotations

from batches.submission.reach import Reach
from batches.submission.targets import KnownTargets
from gateway_engine.quota.types import ProviderLimits
from gateway_engine.routing import ProviderConfig, RouteRule, routing_table
from interactive.targets import model_endpoints


def config(name: str, kind: str) -> ProviderConfig:
    limits = ProviderLimits(
        name=name, rpm=60, tpm=10**6, burst_seconds=1, max_concurrency=1, timeout_seconds=5
    )
    api_version = "2024-10-21" if kind == "azure_openai" else ""
    return ProviderConfig(
        name=name, base_url="http://x", model="m", limits=limits, kind=kind, api_version=api_version
    )


def known() -> KnownTargets:
    providers = [config("gpt", "openai"), config("az", "azure_openai"), config("claude", "anthropic"),
                 config("off", "openai")]  # fmt: skip
    rules = [RouteRule(route="embed", provider="gpt"), RouteRule(route="embed", provider="az"),
             RouteRule(route="mixed", provider="gpt"), RouteRule(route="mixed", provider="claude", priority=1),
             RouteRule(route="dark", provider="off")]  # fmt: skip
    table = routing_table(providers, rules)
    flags = {p.name: p.name != "off" for p in providers}
    reach = Reach.of(table, flags)
    return KnownTargets(routes=frozenset(reach.routes), providers=flags, reach=reach)


def test_providers_say_what_their_kind_serves():
    targets = known()
    assert model_endpoints(targets, "gpt") == ["chat", "embeddings", "responses", "messages"]
    assert model_endpoints(targets, "az") == ["chat", "embeddings", "responses", "messages"]
    assert model_endpoints(targets, "claude") == ["chat", "responses", "messages"]  # no embeddings API


def test_a_route_serves_embeddings_only_when_every_provider_it_reaches_does():
    targets = known()
    assert "embeddings" in model_endpoints(targets, "embed")
    assert model_endpoints(targets, "mixed") == ["chat", "responses", "messages"]  # claude is a fallback
    assert model_endpoints(targets, "dark") == []  # reaches no enabled provider
    assert model_endpoints(targets, "nothing") == []
