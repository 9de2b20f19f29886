"""Interactive first, end to end: a 5,000-item batch saturates a provider through two default-pool
Celery workers; interactive calls through the ASGI server are served before batch work that has not
been sent yet. Counted at the simulator's trace: between the moment an interactive call starts waiting
(a probe request sent straight to the simulator just before it) and its own arrival, at most
max_concurrency + ceil(burst_seconds × rpm / 60) batch requests reach the provider."""

from __future__ import annotations

import math

import httpx
import pytest

from batches.execution import cancel_batch
from teams.services import create_api_key
from tests.scheduling.conftest import q, queue_batch, wait_for

from .conftest import settled

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

RPM, BURST_S, MAX_CONCURRENCY = 600, 1.0, 4
BOUND = MAX_CONCURRENCY + math.ceil(BURST_S * RPM / 60)  # 14


@pytest.mark.timeout(240)
def test_interactive_calls_overtake_a_saturating_batch(
    sim_server, make_provider, make_route, team, workers, gateway
):
    sim = sim_server({"seed": 3, "trace_tag_regex": r"^(\w+):", "providers": {
        "busy": {"median_ms": 120, "sigma": 0.2, "max_concurrency": 20, "completion_tokens": 4},
        "probe": {"median_ms": 1, "sigma": 0.1}}})  # fmt: skip
    busy = make_provider("busy", base_url=sim.provider_url("busy"), rpm=RPM, tpm=10**7, burst_seconds=BURST_S,
                         max_concurrency=MAX_CONCURRENCY)  # fmt: skip
    make_route("live", busy)
    w = workers()
    w.start("w1")
    w.start("w2")
    batch = queue_batch(team, [q(f"b{i:05d}", "busy", tag="batch", max_tokens=4) for i in range(5000)])
    w.start_batch(batch.id)
    tagged = lambda tag: [r for r in sim.trace() if r["tag"] == tag]  # noqa: E731
    wait_for(lambda: len(tagged("batch")) >= 30, 60, "the batch to saturate the provider", w.logs)
    key = create_api_key(team, "live")[1]
    settled()
    headers = {"Authorization": f"Bearer {key}", "X-Gateway-Max-Wait": "20"}
    before, waits = [], []
    for i in range(6):
        httpx.post(sim.provider_url("probe") + "/chat/completions", timeout=10,
                   json={"model": "probe", "messages": [{"role": "user", "content": f"probe:{i}"}]})  # fmt: skip
        answer = httpx.post(gateway + "/v1/chat/completions", headers=headers, timeout=30,
                            json={"model": "live", "messages": [{"role": "user", "content": f"live:{i}"}],
                                  "max_tokens": 4})  # fmt: skip
        assert answer.status_code == 200, answer.text
        trace = sim.trace()
        start = [r for r in trace if r["tag"] == "probe"][-1]["arrival_s"]
        arrived = [r for r in trace if r["tag"] == "live"][-1]["arrival_s"]
        before.append(sum(1 for r in trace if r["tag"] == "batch" and start < r["arrival_s"] < arrived))
        waits.append(arrived - start)
    rate = len(tagged("batch")) / max(
        1e-9, max(r["arrival_s"] for r in tagged("batch")) - min(r["arrival_s"] for r in tagged("batch"))
    )  # noqa: E501
    print(f"\nbatch requests that reached the provider before each interactive call: {before} (bound {BOUND}); "
          f"interactive wait (probe → arrival) s: {[round(x, 3) for x in waits]}; batch rate {rate:.1f}/s "
          f"(provider rate {RPM / 60:.0f}/s)")  # fmt: skip
    cancel_batch(str(batch.id))
    w.stop()
    assert max(before) <= BOUND, before
    assert sim.counters()["providers"]["busy"]["rate_limited_429"] == 0
