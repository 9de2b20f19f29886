"""A stream the gateway ends itself at ``GATEWAY_STREAM_MAX_SECONDS`` ends with the surface's own last
event: ``response.failed`` on ``/v1/responses``, Anthropic's ``event: error`` on ``/v1/messages`` (chat's
``data: {"error": …stream_too_long}`` is tests/hardening/test_ingress.py's); the lease is released."""

from __future__ import annotations

import anthropic
import openai
import pytest

from providers.adapters import provider_limits
from providers.limits import snapshot_all_sync
from teams.services import create_api_key
from tests.waiting import wait_until

from .conftest import settled, start_uvicorn, stop
from .test_sdk import KINDS

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def short_streams(django_db_setup, django_db_blocker, tmp_path_factory):
    proc, url = start_uvicorn(tmp_path_factory.mktemp("cut") / "uvicorn.log", GATEWAY_STREAM_MAX_SECONDS="1")
    yield url
    stop(proc)


def test_a_stream_past_its_bound_ends_with_each_surfaces_own_event(
    short_streams, sim_server, make_provider, make_route, team
):
    slow = {**KINDS["gpt"], "stream_chunks": 40, "chunk_delay_ms": 100}  # a 4 s stream
    sim = sim_server({"time_scale": 1, "providers": {"gpt": slow}})
    gpt = make_provider("gpt", base_url=sim.provider_url("gpt"), model="gpt-sim", rpm=6000, tpm=10**6)
    make_route("chat", gpt)
    key = create_api_key(team, "cut")[1]
    settled()
    client = openai.OpenAI(base_url=short_streams + "/v1", api_key=key, max_retries=0, timeout=30)
    events = list(client.responses.create(model="chat", input="x", max_output_tokens=100, stream=True))
    assert events[-1].type == "response.failed", [e.type for e in events][-3:]
    assert events[-1].response.error.message.startswith("stream_too_long: ")
    assert [e.sequence_number for e in events] == list(range(len(events)))
    claude = anthropic.Anthropic(base_url=short_streams, api_key=key, max_retries=0, timeout=30)
    with pytest.raises(anthropic.APIStatusError) as cut:
        with claude.messages.stream(
            model="chat", max_tokens=100, messages=[{"role": "user", "content": "x"}]
        ) as s:
            for _ in s:
                pass
    assert cut.value.body["error"]["type"] == "api_error"
    assert cut.value.body["error"]["message"].startswith("stream_too_long: ")
    wait_until(lambda: snapshot_all_sync([provider_limits(gpt)])[0].leases_in_flight == 0, 10,
               what="the streams' leases released")  # fmt: skip
    assert sim.counters()["providers"]["gpt"]["streams_completed"] == 0
