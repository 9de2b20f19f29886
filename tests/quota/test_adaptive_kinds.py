"""Shared keys with no outside use: a provider's own remaining-quota headers never hold the gateway below
its configured rate (docs/quota.md "Shared keys"). Per kind, with ``adaptive`` on, the engine runs
against the simulator configured to the gateway's own limits; what the simulator saw is measured.

On the commit before this test, Azure's short-window request count was read as "left for the next 60 s":
against its 1-s window of 16 the gateway sent its burst, then about one request every 3.5 s (measured:
60 requests over 204 s, 17/min of the configured 900).
"""

from __future__ import annotations

import pytest

from gateway_engine import CrossProviderBatcher
from gateway_engine.quota.local import LocalQuotaStore
from gateway_engine.routing import routing_table_from_config
from sim.testing import run_simulator_subprocess

RPM = 900  # 15 requests a second: a measured window of ~3 s holds ~45 of them
TPM = 900_000
ITEMS = 75  # 1 s of burst (~30 arrivals), then ~3 s at the configured rate
WARMUP_S = 1.0  # arrivals in the first second (the buckets' initial burst) are not measured
# the simulated provider's request limit, 10 % above the configured one (as an operator configures a
# little below the real limit): a loaded machine's jitter between grant and arrival must not turn into a
# 429 (those are the bucket tests' subject); its tokens are the configured ones, so its token headers
# stay believable and are followed
SIM_RPM = RPM * 1.1

SIM = {
    "openai": {"kind": "openai", "model": "m", "rpm": SIM_RPM, "tpm": TPM, "burst_seconds": 5},
    "anthropic": {"kind": "anthropic", "model": "m", "rpm": SIM_RPM, "itpm": TPM, "otpm": TPM, "burst_seconds": 5},
    "gemini": {"kind": "gemini", "model": "m", "rpm": SIM_RPM, "tpm": TPM, "burst_seconds": 5},
    "azure_openai": {"kind": "azure_openai", "model": "m", "deployment": "m", "api_version": "2024-10-21",
                     "rpm": SIM_RPM, "tpm": TPM, "window_seconds": 1},
}  # fmt: skip


def provider_file(kind: str, base_url: str) -> dict:
    entry = {"name": "p", "kind": kind, "base_url": base_url, "model": "m", "rpm": RPM, "tpm": TPM,
             "burst_seconds": 1, "max_concurrency": 16, "timeout_seconds": 10, "max_retries": 3,
             "adaptive": True}  # fmt: skip
    if kind == "azure_openai":
        entry.update(deployment="m", api_version="2024-10-21")
    return {"providers": [entry], "routes": []}


@pytest.mark.parametrize("kind", ["openai", "azure_openai", "anthropic", "gemini"])
def test_adaptive_reaches_the_configured_rate_without_outside_use(kind):
    sim_config = {
        "time_scale": 1,
        "trace_tag_regex": r"\[(t\d+)\]",
        "providers": {"p": {**SIM[kind], "median_ms": 20, "sigma": 0.2, "max_concurrency": 64}},
    }
    with run_simulator_subprocess(sim_config) as sim:  # its own process: no GIL shared with the engine
        table = routing_table_from_config(provider_file(kind, sim.kind_url("p", kind)))
        assert table.providers["p"].limits.adaptive == (kind != "gemini")  # gemini sends no such headers
        items = [
            {"custom_id": f"c{n}", "provider": "p", "messages": [{"role": "user", "content": f"[t{n}] hi"}],
             "params": {"max_tokens": 8}}
            for n in range(ITEMS)
        ]  # fmt: skip
        results = CrossProviderBatcher(table, store=LocalQuotaStore()).batch(items)
        assert [r.status for r in results] == ["succeeded"] * ITEMS
        counters = sim.provider_counters("p")
        trace = sim.trace()
    assert counters["rate_limited_429"] == 0
    arrivals = sorted(row["arrival_s"] for row in trace if row["provider"] == "p")
    assert len(arrivals) == ITEMS  # one request per item: no retries
    measured = [t for t in arrivals if t >= arrivals[0] + WARMUP_S]
    span = measured[-1] - measured[0]
    rate_per_minute = (len(measured) - 1) / span * 60.0
    assert rate_per_minute >= 0.95 * RPM, (kind, len(measured), round(span, 3), round(rate_per_minute))
