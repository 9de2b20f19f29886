"""The provider's batch API seen from sync code: targets and clients (gateway_engine.batch_api, the
one place that speaks each kind's batch wire format over gateway_engine.http), one short event loop
per call (``asyncio.run``; in a thread when a loop already runs), and the providers as the engine sees
them (providers.adapters)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from gateway_engine.batch_api import BatchApiClient, BatchLine, BatchTarget, for_target
from gateway_engine.routing import ProviderConfig
from providers.adapters import provider_config
from providers.models import Provider

T = TypeVar("T")


def provider_configs() -> dict[str, ProviderConfig]:
    """Every provider as the engine sees it, by name (one query)."""
    return {p.name: provider_config(p) for p in Provider.objects.all()}


def target_of(config: ProviderConfig) -> BatchTarget:
    return BatchTarget(
        kind=config.kind,
        base_url=config.base_url,
        api_key=config.api_key or None,
        api_version=config.api_version or None,
        batch_deployment=(config.batch.deployment if config.batch else "") or None,
        model=config.model,
        timeout_s=max(config.timeout_seconds, 60.0),
    )


def line_encoder(config: ProviderConfig) -> Callable[[BatchLine], bytes]:
    """The exact bytes the client uploads for a line (what ``batch_max_bytes`` counts)."""
    return for_target(target_of(config)).encode_line


def run(fn: Callable[[], Awaitable[T]]) -> T:
    """Run one coroutine from sync code: its own loop, or a thread's when one runs here already."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(fn())  # type: ignore[arg-type]
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(fn())  # type: ignore[arg-type]
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=target, name="provider-batch-call")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


def call(config: ProviderConfig, fn: Callable[[BatchApiClient], Awaitable[T]]) -> tuple[T, int]:
    """``fn(client)`` on a fresh client for ``config``; returns its value and the HTTP calls it made.
    BatchApiError propagates (its ``http_calls`` are lost with it: counted as one)."""

    async def go() -> tuple[T, int]:
        client = for_target(target_of(config))
        try:
            value = await fn(client)
            return value, client.http_calls
        finally:
            await client.aclose()

    return run(go)


def wake_dispatchers() -> None:
    """Items handed back to real time: make sure dispatchers run (the reconciler would, later)."""
    from batches.tasks import ensure_dispatchers

    ensure_dispatchers()
