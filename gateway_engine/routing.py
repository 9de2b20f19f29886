"""Routing as pure functions: which providers may serve an item, in which order.

The engine never reads the database. Providers and routing rules are turned into plain frozen dataclasses
once (``providers.adapters.routing_table_from_models`` or ``routing_table_from_config``) and every decision below is a pure
function of that table and the item:

* an item with an explicit ``provider`` skips routing (that provider only, if it is enabled);
* an item with a ``route`` gets that route's enabled rules pointing at enabled providers, grouped by
  priority (0 first); inside one priority the first choice is split by weight, the others of the same
  priority follow (heaviest first), then the next priority's providers — the fallback order;
* ``prefer`` (a capacity move, batches/execution/capacity.py): a provider of the first tier that
  claimed the item from a held-back peer goes first instead of the draw's pick; the rest keep their order.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import ApplicationError
from .provider_file import (
    PROVIDER_FIELDS,
    ROUTE_FIELDS,
    BatchLimits,
    batch_limits,
    effective_adaptive,
    parse_entry,
)
from .quota.types import ProviderLimits


class RoutingError(ApplicationError):
    """An item cannot be routed (unknown route or provider, or nothing enabled)."""

    code = "unroutable"


@dataclass(frozen=True)
class ProviderConfig:
    """Everything the engine needs to call one provider, detached from the ORM."""

    name: str
    base_url: str
    model: str
    limits: ProviderLimits
    api_key: str = field(default="", repr=False)  # never in reprs, logs or tracebacks
    max_retries: int = PROVIDER_FIELDS["max_retries"].default
    enabled: bool = PROVIDER_FIELDS["enabled"].default
    # the provider's wire format (docs/contract.md §3, §5): gateway_engine.wire.for_kind(kind)
    kind: str = PROVIDER_FIELDS["kind"].default
    deployment: str = ""  # azure_openai: the deployment in the URL ("" = model)
    api_version: str = ""  # azure_openai: the api-version query parameter (required there)
    region: str = ""  # bedrock: the AWS region requests are signed for (required there)
    aws_access_key_id: str = ""  # bedrock: the access key id (the secret access key is api_key)
    # max_tokens sent where a kind requires it and the item gives none (GATEWAY_DEFAULT_MAX_TOKENS);
    # also what the output-token reservation uses
    default_max_tokens: int = 1024
    # the provider's own batch API settings (None: no batch API; docs/provider_batches.md)
    batch: BatchLimits | None = None

    @property
    def timeout_seconds(self) -> float:
        return self.limits.timeout_seconds

    @property
    def max_concurrency(self) -> int:
        return self.limits.max_concurrency

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "provider") -> ProviderConfig:
        """From one entry of the provider file (docs/contract.md §3), checked and completed by the
        one table of its fields (gateway_engine.provider_file); ValueError names every problem."""
        v = parse_entry(where, data, PROVIDER_FIELDS)
        limits = ProviderLimits(
            name=v["name"],
            rpm=v["rpm"],
            tpm=v["tpm"],
            burst_seconds=v["burst_seconds"],
            max_concurrency=v["max_concurrency"],
            timeout_seconds=v["timeout_seconds"],
            itpm=v["itpm"] or 0,
            otpm=v["otpm"] or 0,
            adaptive=effective_adaptive(v["kind"], v["adaptive"]),
        )
        return cls(
            name=limits.name,
            base_url=v["base_url"],
            model=v["model"],
            limits=limits,
            api_key=v["api_key"],
            max_retries=v["max_retries"],
            enabled=v["enabled"],
            kind=v["kind"],
            deployment=v["deployment"],
            api_version=v["api_version"],
            region=v["region"],
            aws_access_key_id=v["aws_access_key_id"],
            batch=batch_or_none(v["kind"], v),
        )


def batch_or_none(kind: str, values: Mapping[str, Any]) -> BatchLimits | None:
    """A provider's batch-API settings, or None when it has no batch API enabled."""
    limits = batch_limits(kind, values)
    return limits if limits.enabled else None


@dataclass(frozen=True)
class RouteRule:
    route: str
    provider: str
    priority: int = ROUTE_FIELDS["priority"].default
    weight: int = ROUTE_FIELDS["weight"].default
    enabled: bool = ROUTE_FIELDS["enabled"].default
    cache: bool = ROUTE_FIELDS["cache"].default  # the response cache at temperature 0 (docs/cache.md)


@dataclass(frozen=True)
class RoutingTable:
    providers: Mapping[str, ProviderConfig]
    rules: tuple[RouteRule, ...] = field(default_factory=tuple)

    def provider(self, name: str) -> ProviderConfig:
        try:
            return self.providers[name]
        except KeyError:
            raise RoutingError(f"provider: unknown provider {name!r}") from None


def routing_table(providers: Iterable[ProviderConfig], rules: Iterable[RouteRule] = ()) -> RoutingTable:
    return RoutingTable(providers={p.name: p for p in providers}, rules=tuple(rules))


def routing_table_from_config(data: Mapping[str, Any]) -> RoutingTable:
    """From the provider file's JSON shape: {"providers": [...], "routes": [...]}."""
    providers = [
        ProviderConfig.from_dict(p, f"providers[{i}]") for i, p in enumerate(data.get("providers", []))
    ]
    rules = [
        RouteRule(**parse_entry(f"routes[{i}]", r, ROUTE_FIELDS))
        for i, r in enumerate(data.get("routes", []))
    ]
    return routing_table(providers, rules)


def stable_draw(*parts: object) -> float:
    """A deterministic number in [0, 1) from the given parts (same item → same weighted choice)."""
    digest = hashlib.blake2b("\x1f".join(str(p) for p in parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def weighted_order(rules: list[RouteRule], draw: float) -> list[RouteRule]:
    """Order rules of one priority: the first is picked with probability weight/sum, the rest by weight."""
    if len(rules) <= 1:
        return list(rules)
    total = sum(r.weight for r in rules)
    point = draw * total
    chosen = rules[-1]
    upto = 0.0
    for rule in rules:
        upto += rule.weight
        if point < upto:
            chosen = rule
            break
    rest = sorted((r for r in rules if r is not chosen), key=lambda r: (-r.weight, r.provider))
    return [chosen, *rest]


def candidates(
    table: RoutingTable, *, route: str = "", provider: str = "", draw: float = 0.0, prefer: str = ""
) -> list[ProviderConfig]:
    """Providers that may serve one item, in the order they should be tried (first = preferred).
    ``prefer``: a provider of the first priority tier to try first (ignored when it is not there)."""
    if provider:
        config = table.provider(provider)
        if not config.enabled:
            raise RoutingError(f"provider: provider {provider!r} is disabled")
        return [config]
    if not route:
        raise RoutingError("route: an item needs a route or a provider")
    rules = [
        r
        for r in table.rules
        if r.route == route
        and r.enabled
        and r.provider in table.providers
        and table.providers[r.provider].enabled
    ]
    if not rules:
        known = any(r.route == route for r in table.rules)
        why = "has no enabled provider" if known else "is not a known route"
        raise RoutingError(f"route: {route!r} {why}")
    ordered: list[ProviderConfig] = []
    for priority in sorted({r.priority for r in rules}):
        tier = sorted((r for r in rules if r.priority == priority), key=lambda r: r.provider)
        tier = weighted_order(tier, draw)
        if not ordered and prefer in {r.provider for r in tier}:
            tier = sorted(tier, key=lambda r: r.provider != prefer)  # stable: the others keep their order
        ordered.extend(table.providers[r.provider] for r in tier)
    return ordered


def first_tier_peers(table: RoutingTable, provider: str) -> dict[str, tuple[str, ...]]:
    """peer → the routes in which ``provider`` and that peer are both in the first priority tier (enabled
    rules at enabled providers): the peers whose queued items of those routes ``provider`` may serve
    first when the peer is held back (a capacity move). Empty when ``provider`` is not enabled."""
    config = table.providers.get(provider)
    if config is None or not config.enabled:
        return {}
    peers: dict[str, list[str]] = {}
    for route in dict.fromkeys(r.route for r in table.rules if r.provider == provider):
        live = [
            r
            for r in table.rules
            if r.route == route and r.enabled and r.provider in table.providers
            and table.providers[r.provider].enabled
        ]  # fmt: skip
        first = min((r.priority for r in live), default=None)
        tier = {r.provider for r in live if r.priority == first}
        if provider in tier:
            for peer in sorted(tier - {provider}):
                peers.setdefault(peer, []).append(route)
    return {peer: tuple(routes) for peer, routes in peers.items()}


def preferred_provider(
    table: RoutingTable, *, route: str = "", provider: str = "", salt: str, key: str, prefer: str = ""
) -> str:
    """The provider an item is queued behind: its first candidate for the draw ``stable_draw(salt, key)``
    (salt: the batch id, key: the item's key or custom_id), or "" when it cannot be routed now. The
    scheduler's queue at submission and the engine's queue both come from here, so they agree.
    ``prefer``: the provider a capacity move gave the item (see ``candidates``)."""
    return _first_choice(table, route, provider, stable_draw(salt, key), prefer)


def draw_free_preference(table: RoutingTable, *, route: str = "", provider: str = "") -> str | None:
    """The preferred provider when the draw cannot change it (the same at the lowest and the highest
    draw, e.g. an explicit provider or one rule in the first tier); None when it depends on the draw.
    Lets a caller resolve a whole route once instead of once per item."""
    low, high = _first_choice(table, route, provider, 0.0), _first_choice(table, route, provider, 1 - 2**-53)
    return low if low == high else None


def _first_choice(table: RoutingTable, route: str, provider: str, draw: float, prefer: str = "") -> str:
    try:
        return candidates(table, route=route, provider=provider, draw=draw, prefer=prefer)[0].name
    except RoutingError:
        return ""
