"""Provider rows → the engine's ProviderConfig / ProviderLimits (issue #21 fields), and the prices of
cached reads and cache writes."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.test import override_settings

from providers.adapters import provider_config, provider_limits
from providers.pricing import Prices, add_stats_costs, sum_usage_costs, token_cost

D = Decimal


@pytest.mark.django_db
def test_the_adapter_carries_kind_deployment_api_version_and_the_token_limits(make_provider):
    azure = make_provider(
        "azure", kind="azure_openai", deployment="prod", api_version="2024-10-21", burst_seconds=1.0
    )
    claude = make_provider("claude", kind="anthropic", itpm=30_000, otpm=8_000)
    config = provider_config(azure)
    assert (config.kind, config.deployment, config.api_version) == ("azure_openai", "prod", "2024-10-21")
    assert (config.limits.itpm, config.limits.otpm) == (0, 0)  # not configured
    limits = provider_limits(claude)
    assert (limits.itpm, limits.otpm) == (30_000, 8_000)
    assert provider_config(claude).kind == "anthropic"


@pytest.mark.django_db
def test_default_max_tokens_is_the_setting(make_provider, settings):
    p = make_provider("claude", kind="anthropic")
    assert settings.GATEWAY_DEFAULT_MAX_TOKENS == 1024  # the default (issue #21)
    assert provider_config(p).default_max_tokens == 1024
    with override_settings(GATEWAY_DEFAULT_MAX_TOKENS=777):
        assert provider_config(p).default_max_tokens == 777


PRICED = Prices(D("3"), D("15"), D("0.3"), D("3.75"))  # per million: prompt, completion, cached, write


def test_cached_reads_and_cache_writes_are_priced_apart():
    # 1000 input of which 600 cached and 200 written: 200 uncached x 3 + 600 x 0.3 + 200 x 3.75 + 100 x 15
    cost = token_cost(PRICED, 1000, 100, cached_tokens=600, cache_write_tokens=200)
    assert cost == (200 * D(3) + 600 * D("0.3") + 200 * D("3.75") + 100 * D(15)) / 1_000_000
    assert token_cost(PRICED, 1000, 100) == (1000 * D(3) + 100 * D(15)) / 1_000_000


def test_unset_cache_prices_fall_back_to_the_prompt_price_and_unknown_stays_unknown():
    plain = Prices(D("3"), D("15"))
    assert token_cost(plain, 1000, 0, cached_tokens=600, cache_write_tokens=200) == token_cost(plain, 1000, 0)
    assert token_cost(Prices(None, D("15")), 1000, 0, cached_tokens=1000) is None
    assert token_cost(Prices(None, None, D("1"), D("1")), 0, 0) == 0  # no tokens need no price
    # usage that reports more cached than prompt tokens leaves no negative uncached part
    assert token_cost(PRICED, 100, 0, cached_tokens=300) == 300 * D("0.3") / 1_000_000


def test_stats_and_usage_rows_use_the_cached_split_when_they_carry_it():
    stats = {"providers": {"claude": {"prompt_tokens": 1000, "completion_tokens": 0, "cached_tokens": 1000}}}
    add_stats_costs(stats, {"claude": PRICED})
    assert stats["providers"]["claude"]["cost"] == pytest.approx(0.0003)
    assert sum_usage_costs([(PRICED, 1000, 0, 0, 1000, 0)])["cost"] == pytest.approx(0.0003)
    assert sum_usage_costs([(PRICED, 1000, 0, 0)])["cost"] == pytest.approx(0.003)


@pytest.mark.django_db
def test_prices_are_read_from_the_row(make_provider):
    from providers.pricing import prices_by_provider

    make_provider("claude", price_prompt_per_million=D("3"), price_completion_per_million=D("15"),
                  price_cached_prompt_per_million=D("0.3"), price_cache_write_per_million=D("3.75"))  # fmt: skip
    assert prices_by_provider()["claude"] == PRICED
    from providers.models import Provider

    assert Prices.of(Provider.objects.get(name="claude")) == PRICED
