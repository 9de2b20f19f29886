"""Provider and RoutingRule rows → the engine's plain dataclasses (the Django side of gateway_engine).

The engine (``gateway_engine``) never sees a model instance or ``django.conf.settings``: everything it
needs about a provider is turned into a frozen ``ProviderLimits`` / ``ProviderConfig`` here, with the
settings that shape them (the quota jitter margin) read here.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from django.conf import settings

from gateway_engine.provider_file import effective_adaptive
from gateway_engine.quota.types import ProviderLimits
from gateway_engine.routing import ProviderConfig, RouteRule, RoutingTable, routing_table

from .secrets import reveal


def provider_limits(provider, margin_seconds: float | None = None) -> ProviderLimits:
    """From a Provider row. The margin defaults to settings.GATEWAY_QUOTA_JITTER_MARGIN_SECONDS and is never
    more than half the provider's burst."""
    burst = float(provider.burst_seconds)
    if margin_seconds is None:
        margin_seconds = float(settings.GATEWAY_QUOTA_JITTER_MARGIN_SECONDS)
    return ProviderLimits(
        name=provider.name,
        rpm=provider.rpm,
        tpm=provider.tpm,
        burst_seconds=burst,
        max_concurrency=provider.max_concurrency,
        timeout_seconds=float(provider.timeout_seconds),
        margin_seconds=min(float(margin_seconds), burst / 2.0),
        itpm=int(provider.itpm or 0),  # NULL: not configured (ProviderLimits' 0)
        otpm=int(provider.otpm or 0),
        adaptive=effective_adaptive(provider.kind, provider.adaptive),
    )


def provider_key(provider) -> str:
    """The key to send: GATEWAY_PROVIDER_SECRET_<NAME> wins over the database value, which is decrypted
    here (providers.secrets.reveal) and nowhere else on the way to a provider."""
    if provider.api_key_source == "environment":
        return os.environ[provider.secret_env_name]
    return reveal(provider.api_key)


def provider_config(provider) -> ProviderConfig:
    """Everything the engine needs to call one provider. A provider whose URL moved to an unconfirmed
    origin is disabled and gets no key (its key stays home). ``default_max_tokens`` is
    settings.GATEWAY_DEFAULT_MAX_TOKENS: sent where a kind requires max_tokens and the item gives none,
    and what the output-token reservation assumes."""
    return ProviderConfig(
        name=provider.name,
        base_url=provider.base_url,
        model=provider.model,
        limits=provider_limits(provider),
        api_key=provider_key(provider) if provider.origin_confirmed else "",
        max_retries=int(provider.max_retries),
        enabled=bool(provider.enabled) and provider.origin_confirmed,
        kind=provider.kind,
        deployment=provider.deployment,
        api_version=provider.api_version,
        region=provider.region,
        aws_access_key_id=provider.aws_access_key_id,
        default_max_tokens=int(settings.GATEWAY_DEFAULT_MAX_TOKENS),
        batch=provider.batch_limits if provider.batch_limits.enabled else None,
    )


def routing_table_from_models(providers: Iterable, rules: Iterable) -> RoutingTable:
    """From Provider and RoutingRule model instances (already loaded by the caller)."""
    return routing_table(
        [provider_config(p) for p in providers],
        [
            RouteRule(
                route=r.route,
                provider=r.provider.name,
                priority=r.priority,
                weight=r.weight,
                enabled=r.enabled,
                cache=r.cache,
            )
            for r in rules
        ],
    )
