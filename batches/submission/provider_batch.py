"""The ``provider_batch`` option at submission (docs/provider_batches.md): ``always`` is refused when
a provider an item can reach has no batch API (400 naming the field, nothing stored), and each item's
path is decided from the provider chosen for it (its queue) — ``served_via`` of the stored row."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from gateway_engine.endpoints import CHAT
from gateway_engine.provider_batch_choice import goes_to_batch_api, lacking_batch_api
from gateway_engine.routing import RoutingTable

from ..models import ServedVia
from .errors import FieldError, SubmissionError
from .options import BatchOptions
from .reach import Reach
from .validation import ValidItem

# the endpoints whose items the provider-batch route can send as batch lines (provider_batches/lines.py)
BATCH_LINE_ENDPOINTS = frozenset({CHAT})


def check_provider_batch(options: BatchOptions, valid: Sequence[ValidItem], reach: Reach) -> None:
    """``always``: every provider each item's route (or provider) reaches has a batch API."""
    if options.provider_batch != "always":
        return
    other = sorted({v.endpoint for v in valid} - BATCH_LINE_ENDPOINTS)
    if other:
        message = f"'always' sends chat items only through a provider's batch API; these items are {other[0]}"
        raise SubmissionError(400, [FieldError(None, "provider_batch", message)])
    seen: set[tuple[str, str]] = set()
    lacking: set[str] = set()
    for v in valid:
        key = (v.route, v.provider)
        if key in seen:
            continue
        seen.add(key)
        configs = (
            reach.routes.get(v.route, ())
            if v.route
            else tuple(c for c in (reach.providers.get(v.provider),) if c is not None)
        )
        lacking.update(lacking_batch_api(configs))
    if lacking:
        raise SubmissionError(
            400,
            [
                FieldError(
                    None,
                    "provider_batch",
                    "'always' needs a batch API on every provider the items can reach; without one: "
                    + ", ".join(sorted(lacking)),
                )
            ],
        )


def path_chooser(options: BatchOptions, table: RoutingTable) -> Callable[[str, str], str]:
    """(queue provider name, item endpoint) → the item's ``served_via`` (decided once per provider);
    an item of an endpoint the route has no lines for is served in real time."""
    window = options.window.total_seconds() if options.window else None
    memo: dict[str, str] = {}

    def choose(provider: str, endpoint: str = CHAT) -> str:
        if endpoint not in BATCH_LINE_ENDPOINTS:
            return ServedVia.REALTIME.value
        if provider not in memo:
            config = table.providers.get(provider) if provider else None
            diverted = goes_to_batch_api(options.provider_batch, window, config)
            memo[provider] = ServedVia.PROVIDER_BATCH.value if diverted else ServedVia.REALTIME.value
        return memo[provider]

    return choose
