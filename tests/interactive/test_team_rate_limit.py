"""A team's RPM limit across providers on the interactive lane (issue #37): the same admission step as the
batch path (gateway_engine/quota/team_quota.py). The ASGI server (uvicorn), the simulator; what is
asserted is what the simulator saw: the capped team's calls conform to its bucket, and the other team's
calls are not held behind the capped team's waiting ones."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from teams.models import Team
from teams.services import create_api_key

from .conftest import settled

pytestmark = pytest.mark.django_db(transaction=True)

RPM_LIMIT = 30  # the gateway's default burst (10 s): 5 calls at once, then one per ~2.07 s
CAPACITY, PER_S = RPM_LIMIT * 10 / 60, RPM_LIMIT * 50 / 60 / 60
A_CALLS, B_CALLS = 8, 5
SIM = {"trace_tag_regex": r"^(\w+):", "providers": {"tr": {"median_ms": 15, "completion_tokens": 2}}}


async def _call(client: httpx.AsyncClient, url: str, key: str, text: str) -> httpx.Response:
    return await client.post(
        url + "/v1/chat/completions",
        headers={"Authorization": f"Bearer {key}", "X-Gateway-Max-Wait": "30"},
        json={"model": "teamrl", "messages": [{"role": "user", "content": text}], "max_tokens": 2},
        timeout=60,
    )


@pytest.mark.timeout(120)
def test_a_teams_rpm_limit_holds_on_the_interactive_lane_and_the_other_team_goes_on(
    sim_server, make_provider, make_route, team, other_team, gateway
):
    sim = sim_server(SIM)
    provider = make_provider("tr", base_url=sim.provider_url("tr"), rpm=60_000, tpm=10**8,
                             max_concurrency=8, burst_seconds=1.0)  # fmt: skip
    make_route("teamrl", provider)
    key_a, key_b = create_api_key(team, "a")[1], create_api_key(other_team, "b")[1]
    Team.objects.filter(pk=team.pk).update(rpm_limit=RPM_LIMIT)
    Team.objects.get(pk=team.pk).save()  # the save the admin does: published on commit
    settled()
    tagged = lambda tag: [r for r in sim.trace() if r["tag"] == tag]  # noqa: E731

    async def run():
        async with httpx.AsyncClient() as client:
            a = [asyncio.ensure_future(_call(client, gateway, key_a, f"A:{i}")) for i in range(A_CALLS)]
            while len(tagged("A")) < CAPACITY:  # A's burst is through; the rest of A's calls wait
                await asyncio.sleep(0.01)
            b = await asyncio.gather(*(_call(client, gateway, key_b, f"B:{j}") for j in range(B_CALLS)))
            return await asyncio.gather(*a), b

    answers_a, answers_b = asyncio.run(run())
    assert [r.status_code for r in answers_a + answers_b] == [200] * (A_CALLS + B_CALLS)
    arrivals_a = sorted(float(r["arrival_s"]) for r in tagged("A"))
    arrivals_b = sorted(float(r["arrival_s"]) for r in tagged("B"))
    assert len(arrivals_a) == A_CALLS and len(arrivals_b) == B_CALLS
    # every window of A's calls at the provider within its bucket (0.5 s of grant → arrival jitter)
    for i in range(len(arrivals_a)):
        for j in range(i, len(arrivals_a)):
            bound = CAPACITY + PER_S * (arrivals_a[j] - arrivals_a[i] + 0.5)
            assert j - i + 1 <= bound + 1e-9, (arrivals_a, i, j)
    # A's last calls waited seconds for its bucket; B's five went through meanwhile, not behind them
    assert arrivals_a[-1] - arrivals_a[0] >= (A_CALLS - CAPACITY - 1) / PER_S
    assert arrivals_b[-1] < arrivals_a[int(CAPACITY) + 1], (arrivals_a, arrivals_b)
