"""Both provider transports (aiohttp, the default; httpx, selectable with GATEWAY_PROVIDER_TRANSPORT) run
the same engine against the same real local provider server and give the same outcomes: success, 4xx
recorded once, 5xx and 429 retried (Retry-After honoured), a timeout retried, answers cleaned."""

from __future__ import annotations

import asyncio

import pytest
from django.test import override_settings

from gateway_engine import CrossProviderBatcher, EngineOptions, RetryPolicy
from gateway_engine.breaker import BreakerConfig, LocalBreaker
from gateway_engine.http import AiohttpProviderClient, HttpClients, ProviderClient
from gateway_engine.quota.local import LocalQuotaStore
from gateway_engine.routing import ProviderConfig, routing_table
from tests.factories import work_item

from .provider_server import Reply, ok_reply

FAST = RetryPolicy(base_seconds=0.05, cap_seconds=0.2)


def config(server, name: str, **kw) -> ProviderConfig:
    data = {"name": name, "base_url": server.url(name), "model": f"{name}-m", "rpm": 60_000,
            "tpm": 10_000_000, "max_concurrency": 4, "timeout_seconds": 5, "max_retries": 2}  # fmt: skip
    return ProviderConfig.from_dict({**data, **kw})


def outcomes(server, transport: str) -> dict:
    server.behaviours.update(
        {
            "ok": lambda n, r, a, b: ok_reply(),
            "bad": lambda n, r, a, b: Reply(400),
            "flaky": lambda n, r, a, b: Reply(503) if a == 1 else ok_reply(),
            "limited": lambda n, r, a, b: Reply(429, headers={"Retry-After": "1"}) if a == 1 else ok_reply(),
            "slow": lambda n, r, a, b: Reply(200, delay=2.0) if a == 1 else ok_reply(),
            "nul": lambda n, r, a, b: Reply(200, body={"choices": [{"message": {"content": "a\u0000b"}}]}),
        }
    )
    configs = [config(server, name) for name in ("ok", "bad", "flaky", "limited", "nul")]
    configs.append(config(server, "slow", timeout_seconds=0.5))
    batcher = CrossProviderBatcher(
        routing_table(configs),
        store=LocalQuotaStore(),
        breaker=LocalBreaker(BreakerConfig(consecutive_failures=1000, min_requests=1000)),
        options=EngineOptions(retry=FAST, transport=transport, seed=1),
    )
    tag = transport[0].upper()  # same-length ids: the same prompt, so the same token counts
    items = [work_item(f"{c.name}-{tag}", provider=c.name) for c in configs]
    results = batcher.batch(items)
    return {
        r.custom_id.rsplit("-", 1)[0]: (
            r.ok,
            r.attempts,
            r.error_type,
            r.error_status_code,
            str(r.response).replace(f"-{tag}", "-T"),
        )
        for r in results
    }


def test_both_transports_give_the_same_outcomes(provider_server):
    by_transport = {t: outcomes(provider_server, t) for t in ("aiohttp", "httpx")}
    assert by_transport["aiohttp"] == by_transport["httpx"]
    got = by_transport["httpx"]
    assert got["ok"][:3] == (True, 1, "")
    assert got["bad"][:4] == (False, 1, "client_error", 400)  # recorded, never retried
    assert got["flaky"][:2] == (True, 2)  # 503 retried
    assert got["limited"][:2] == (True, 2)  # 429 retried after its Retry-After
    assert got["slow"][:2] == (True, 2)  # the timed-out attempt retried
    assert "a\ufffdb" in str(got["nul"][4]) and "\x00" not in str(got["nul"][4])  # cleaned the same way
    for name in ("ok", "bad", "flaky", "limited", "slow", "nul"):
        hits = [h for h in provider_server.hits if h.provider == name]
        assert len(hits) == 2 * got[name][1], name  # both transports sent the same attempts


def test_the_setting_selects_the_transport():
    from batches.execution.engine_wiring import engine_options

    assert engine_options().transport == "aiohttp"
    with override_settings(GATEWAY_PROVIDER_TRANSPORT="httpx"):
        assert engine_options().transport == "httpx"


def test_an_unknown_transport_is_refused_loudly(provider_server):
    with pytest.raises(ValueError, match="transport: must be one of aiohttp, httpx, got 'requests'"):
        EngineOptions(transport="requests")
    with pytest.raises(ValueError, match="transport"):
        HttpClients(transport="curl")
    cfg = config(provider_server, "ok")

    async def kinds():
        default, chosen = HttpClients(), HttpClients(transport="httpx")
        try:
            return type(default.get(cfg)), type(chosen.get(cfg))
        finally:
            await default.aclose()
            await chosen.aclose()

    assert asyncio.run(kinds()) == (AiohttpProviderClient, ProviderClient)
