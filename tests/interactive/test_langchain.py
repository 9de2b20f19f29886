"""LangChain's own ChatOpenAI pointed at the gateway (base_url=<gateway>/v1): ``.batch()`` of 100 prompts
in each of 3 processes at once. Every prompt is answered and the provider never answers 429, because
the gateway queues the 300 calls locally under the provider's quota (docs/benchmarks.md has the same
code pointed at the simulator directly, which loses items to 429s)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from teams.services import create_api_key

from .conftest import settled

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

CLIENT = r"""
import sys
from langchain_openai import ChatOpenAI
base, key, who = sys.argv[1], sys.argv[2], sys.argv[3]
llm = ChatOpenAI(base_url=base, api_key=key, model="chat", max_tokens=4, max_retries=0, timeout=120)
answers = llm.batch([f"{who}:{i}" for i in range(100)], config={"max_concurrency": 100}, return_exceptions=True)
failed = [a for a in answers if isinstance(a, Exception)]
if failed:  # what went wrong, for the assertion's message
    print(f"{len(failed)} failed, first: {failed[0]!r}"[:600], file=sys.stderr)
print(sum(1 for a in answers if not isinstance(a, Exception) and a.content))
"""


@pytest.mark.timeout(180)
def test_three_langchain_processes_get_every_answer_and_the_provider_no_429(
    sim_server, make_provider, make_route, team, gateway
):
    # the simulator enforces 3,000 rpm with a 1 s bucket (50 requests): 300 at once would overflow it
    sim = sim_server({"time_scale": 1, "providers": {"gpt": {"model": "gpt-sim", "rpm": 3000, "burst_seconds": 1,
                                                             "median_ms": 20, "max_concurrency": 50}}})  # fmt: skip
    make_route("chat", make_provider("gpt", base_url=sim.provider_url("gpt"), model="gpt-sim", rpm=3000,
                                     burst_seconds=1.0, tpm=10**7, max_concurrency=40))  # fmt: skip
    key = create_api_key(team, "langchain")[1]
    settled()
    procs = [subprocess.Popen([sys.executable, "-c", CLIENT, gateway + "/v1", key, f"p{n}"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for n in range(3)]  # fmt: skip
    answered, errors = [], []
    for proc in procs:
        out, err = proc.communicate(timeout=150)
        assert proc.returncode == 0, err[-2000:]
        answered.append(int(out.strip().splitlines()[-1]))
        errors.append(err.strip()[-600:])
    counters = sim.counters()["providers"]["gpt"]
    print(f"\nanswered per process {answered}; at the simulator: {counters['ok']} ok, "
          f"{counters['rate_limited_429']} × 429")  # fmt: skip
    assert answered == [100, 100, 100], errors
    assert counters["rate_limited_429"] == 0
    assert sum(sim.request_counts()["gpt"].values()) == 300  # one request per prompt
