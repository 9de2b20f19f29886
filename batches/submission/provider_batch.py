"""The ``provider_batch`` option at submission (docs/provider_batches.md): ``always`` is refused when
a provider an item can reach has no batch API (400 naming the field, nothing stored), and each item's
path is decided from the provider chosen for it (its queue) — ``served_via`` of the stored row."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from gateway_engine.endpoints import CHAT
from gateway_engine.kinds import KINDS
from gateway_engine.provider_batch_choice import goes_to_batch_api, lacking_batch_api
from gateway_engine.routing import ProviderConfig, RoutingTable

from ..models import ServedVia
from .errors import FieldError, SubmissionError
from .options import BatchOptions
from .reach import Reach
from .validation import ValidItem


def takes_lines_of(config: ProviderConfig | None, endpoint: str) -> bool:
    """Whether ``config``'s kind's batch API takes lines of ``endpoint`` (kinds.BatchApi.endpoints:
    chat everywhere, embeddings at OpenAI's)."""
    if config is None:
        return False
    batch_api = KINDS[config.kind].batch_api
    return batch_api is not None and endpoint in batch_api.endpoints


def check_provider_batch(options: BatchOptions, valid: Sequence[ValidItem], reach: Reach) -> None:
    """``always``: every provider each item's route (or provider) reaches has a batch API."""
    if options.provider_batch != "always":
        return
    seen: set[tuple[str, str, str]] = set()
    lacking: set[str] = set()
    for v in valid:
        key = (v.route, v.provider, v.endpoint)
        if key in seen:
            continue
        seen.add(key)
        configs = (
            reach.routes.get(v.route, ())
            if v.route
            else tuple(c for c in (reach.providers.get(v.provider),) if c is not None)
        )
        lacking.update(lacking_batch_api(configs))
        if v.endpoint != CHAT:
            other = sorted(
                c.name for c in configs if c.batch is not None and not takes_lines_of(c, v.endpoint)
            )
            if other:
                message = (f"'always' needs a batch API that takes {v.endpoint} lines on every provider the items "
                           f"can reach; {', '.join(other)}'s takes chat lines only")  # fmt: skip
                raise SubmissionError(400, [FieldError(None, "provider_batch", message)])
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
        key = f"{provider}\x1f{endpoint}"
        if key not in memo:
            config = table.providers.get(provider) if provider else None
            diverted = takes_lines_of(config, endpoint) and goes_to_batch_api(
                options.provider_batch, window, config
            )
            memo[key] = ServedVia.PROVIDER_BATCH.value if diverted else ServedVia.REALTIME.value
        return memo[key]

    return choose
