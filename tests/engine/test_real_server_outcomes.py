"""The engine against a real local provider server, through its one provider transport (aiohttp): success,
4xx recorded once, 5xx and 429 retried (Retry-After honoured), a timeout retried, answers cleaned; the
server saw exactly one request per attempt."""

from __future__ import annotations

from gateway_engine import CrossProviderBatcher, EngineOptions, RetryPolicy
from gateway_engine.breaker import BreakerConfig, LocalBreaker
from gateway_engine.quota.local import LocalQuotaStore
from gateway_engine.routing import ProviderConfig, routing_table
from tests.factories import work_item

from .provider_server import Reply, ok_reply

FAST = RetryPolicy(base_seconds=0.05, cap_seconds=0.2)


def config(server, name: str, **kw) -> ProviderConfig:
    data = {"name": name, "base_url": server.url(name), "model": f"{name}-m", "rpm": 60_000,
            "tpm": 10_000_000, "max_concurrency": 4, "timeout_seconds": 5, "max_retries": 2}  # fmt: skip
    return ProviderConfig.from_dict({**data, **kw})


def outcomes(server) -> dict:
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
        options=EngineOptions(retry=FAST, seed=1),
    )
    items = [work_item(c.name, provider=c.name) for c in configs]
    results = batcher.batch(items)
    return {
        r.custom_id: (r.ok, r.attempts, r.error_type, r.error_status_code, str(r.response)) for r in results
    }


def test_each_outcome_and_what_the_provider_saw(provider_server):
    got = outcomes(provider_server)
    assert got["ok"][:3] == (True, 1, "")
    assert got["bad"][:4] == (False, 1, "client_error", 400)  # recorded, never retried
    assert got["flaky"][:2] == (True, 2)  # 503 retried
    assert got["limited"][:2] == (True, 2)  # 429 retried after its Retry-After
    assert got["slow"][:2] == (True, 2)  # the timed-out attempt retried
    assert "a\ufffdb" in str(got["nul"][4]) and "\x00" not in str(got["nul"][4])  # cleaned
    for name in ("ok", "bad", "flaky", "limited", "slow", "nul"):
        hits = [h for h in provider_server.hits if h.provider == name]
        assert len(hits) == got[name][1], name  # one request per attempt, nothing re-sent underneath
