"""What an item may name as its target — the known routes and providers, passed in as a value — and
the wording of an unknown one ("did you mean …", "… is a provider")."""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from .reach import Reach

# Between an error and its hint ("did you mean …", "… is a provider"); /v1 rewrites hints after it.
HINT_SEPARATOR = " — "


@dataclass(frozen=True)
class KnownTargets:
    """The routing table as submission reads it: ``routes`` that have an enabled rule to an enabled
    provider, and every provider's name → its ``enabled`` flag as stored. (Not the engine's
    RoutingTable: there a provider whose URL moved to an unconfirmed origin is disabled too, and
    submission accepts items for it.) ``reach``: the providers each route and provider name reaches,
    whose kinds check the item's params (``reach.Reach``; empty: nothing is checked per provider).
    Built from the database by ``service.known_targets``."""

    routes: frozenset[str] = frozenset()
    providers: Mapping[str, bool] = field(default_factory=dict)
    reach: Reach = field(default_factory=Reach)


def close_name(name: str, names: Iterable[str]) -> str | None:
    """The known name closest to a misspelt one (difflib), or None when nothing is close."""
    matches = difflib.get_close_matches(name, sorted(names), n=1, cutoff=0.6)
    return matches[0] if matches else None


def unknown_route(name: str, targets: KnownTargets) -> str:
    """'unknown route' with what was probably meant: a provider of that name, or a close route or provider."""
    sep = HINT_SEPARATOR
    providers = targets.providers
    if name in providers:
        disabled = "" if providers[name] else " (disabled)"
        return (
            f'unknown route {name!r}{sep}{name!r} is a provider{disabled}: use "provider": {json.dumps(name)}'
        )
    message = f"unknown route {name!r}: no enabled routing rule to an enabled provider"
    if guess := close_name(name, targets.routes):
        return f"{message}{sep}did you mean {guess!r}?"
    if guess := close_name(name, providers):
        return f'{message}{sep}did you mean "provider": {json.dumps(guess)}?'
    return message


def unknown_provider(name: str, targets: KnownTargets) -> str:
    """'unknown provider' with what was probably meant: a route of that name, or a close provider."""
    message = f"unknown provider {name!r}"
    if name in targets.routes:
        return f'{message}{HINT_SEPARATOR}{name!r} is a route: use "route": {json.dumps(name)}'
    if guess := close_name(name, targets.providers):
        return f"{message}{HINT_SEPARATOR}did you mean {guess!r}?"
    return message
