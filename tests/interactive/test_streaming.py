"""``stream: true`` end to end (uvicorn + gateway_site.asgi, the simulator's streams, the openai SDK):
chunks through every kind, usage reconciled into the budget, the provider lease held until the last
chunk, a client that leaves mid-stream (the simulator sees the upstream closed, everything released),
a provider failure after the first chunk (the error event, no [DONE]) and one before it (retried)."""

from __future__ import annotations

import json
import time

import httpx
import openai
import pytest

from gateway_engine.error_kinds import error_kind
from providers.adapters import provider_limits
from providers.limits import snapshot_all_sync
from providers.limits.budgets import budget_usage
from teams.services import create_api_key
from tests.waiting import wait_until

from .conftest import logged_calls, settled
from .test_sdk import KINDS, kind_providers

pytestmark = pytest.mark.django_db(transaction=True)


def leases(provider) -> int:
    return snapshot_all_sync([provider_limits(provider)])[0].leases_in_flight


def test_every_kind_streams_through_the_sdk_with_usage_only_when_asked(
    sim_server, make_provider, make_route, team, sdk
):
    sim = sim_server({"time_scale": 1, "providers": KINDS})
    kind_providers(sim, make_provider, make_route)
    client = sdk(create_api_key(team, "sdk")[1])
    for name in KINDS:
        for include in (False, True):
            extra = {"stream_options": {"include_usage": True}} if include else {}
            chunks = list(client.chat.completions.create(
                model=f"r-{name}", messages=[{"role": "user", "content": f"stream {name}"}], max_tokens=12,
                stream=True, **extra))  # fmt: skip
            text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
            assert text.startswith(f"[{name}]"), (name, text)
            assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] in ("length", "stop")
            usage = [c.usage for c in chunks if c.usage is not None]
            if include:
                assert len(usage) == 1 and chunks[-1].choices == [] and usage[0].completion_tokens > 0
            else:
                assert usage == []  # asked for upstream all the same (the settle needs it), not forwarded
    assert sim.shape_rejections() == {name: 0 for name in KINDS}
    rows = logged_calls(2 * len(KINDS))
    assert all(r.stream and r.status == "succeeded" and r.completion_tokens > 0 for r in rows)
    counters = sim.counters()["providers"]
    assert {n: counters[n]["streams_completed"] for n in KINDS} == {n: 2 for n in KINDS}


def test_the_settle_uses_the_streams_usage_and_the_lease_is_held_until_the_last_chunk(
    sim_server, make_provider, make_route, team, sdk
):
    sim = sim_server({"time_scale": 1, "providers": {"gpt": {**KINDS["gpt"], "stream_chunks": 4,
                                                             "chunk_delay_ms": 300}}})  # fmt: skip
    gpt = make_provider("gpt", base_url=sim.provider_url("gpt"), model="gpt-sim", rpm=6000, tpm=10**6)
    make_route("chat", gpt)
    team.daily_token_budget = 100_000
    team.save()
    client = sdk(create_api_key(team, "sdk")[1])
    stream = client.chat.completions.create(
        model="chat", messages=[{"role": "user", "content": "x"}], max_tokens=500, stream=True
    )  # fmt: skip  (reserves ~501)
    next(iter(stream))
    assert leases(gpt) == 1  # held while the stream runs
    rest = list(stream)
    assert rest[-1].choices[0].finish_reason
    wait_until(lambda: leases(gpt) == 0, 5, what="the lease back after the last chunk")
    (row,) = logged_calls(1)
    used = {period: spent for period, _, spent in budget_usage(team)}
    assert used["day"] == row.prompt_tokens + row.completion_tokens == 1 + 5  # the stream's usage, not ~501


def test_a_client_that_leaves_mid_stream_closes_the_upstream_and_releases_everything(
    sim_server, make_provider, make_route, team, gateway
):
    sim = sim_server({"time_scale": 1, "providers": {"gpt": {**KINDS["gpt"], "stream_chunks": 20,
                                                             "chunk_delay_ms": 200}}})  # fmt: skip
    gpt = make_provider("gpt", base_url=sim.provider_url("gpt"), model="gpt-sim", rpm=6000, tpm=10**6)
    make_route("chat", gpt)
    team.daily_token_budget = 100_000
    team.save()
    key = create_api_key(team, "sdk")[1]
    settled()
    body = {"model": "chat", "messages": [{"role": "user", "content": "x"}], "max_tokens": 40, "stream": True}
    with httpx.stream("POST", gateway + "/v1/chat/completions", json=body, timeout=30,
                      headers={"Authorization": f"Bearer {key}"}) as response:  # fmt: skip
        assert response.status_code == 200
        lines = response.iter_lines()
        assert next(line for line in lines if line.startswith("data: "))
        assert leases(gpt) == 1
    # the client is gone after one chunk: the gateway closed its upstream connection
    wait_until(lambda: sim.counters()["providers"]["gpt"]["streams_aborted_by_client"] == 1, 10,
               what="the simulator to see its stream's client leave")  # fmt: skip
    wait_until(lambda: leases(gpt) == 0, 5, what="the lease back")
    counters = sim.counters()["providers"]["gpt"]
    assert counters["in_flight"] == 0 and counters["streams_completed"] == 0
    (row,) = logged_calls(1)
    assert (row.status, row.error_type, row.stream) == ("failed", "cancelled", True)
    used = {period: spent for period, _, spent in budget_usage(team)}
    assert used["day"] == 1 + 40  # settled at its estimate (prompt ~1 + max_tokens): nobody reported usage


def test_a_provider_failure_after_the_first_chunk_ends_the_stream_with_an_error_event(
    sim_server, make_provider, make_route, team, gateway
):
    sim = sim_server({"time_scale": 1, "providers": {"gpt": KINDS["gpt"]}})
    make_route(
        "chat", make_provider("gpt", base_url=sim.provider_url("gpt"), model="gpt-sim", rpm=6000, tpm=10**6)
    )
    key = create_api_key(team, "sdk")[1]
    settled()
    body = {"model": "chat", "messages": [{"role": "user", "content": "x [[sim:stream_error_after=2]]"}],
            "max_tokens": 20, "stream": True}  # fmt: skip
    answer = httpx.post(gateway + "/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {key}"},
                        timeout=30)  # fmt: skip
    assert answer.status_code == 200
    events = [line[6:] for line in answer.text.splitlines() if line.startswith("data: ")]
    assert "[DONE]" not in events
    last = json.loads(events[-1])
    assert set(last["error"]) == {"message", "type", "code"} and last["error"]["type"] == "server_error"
    assert sum(1 for e in events[:-1] if json.loads(e)["choices"][0]["delta"].get("content")) == 2
    (row,) = logged_calls(1)
    assert (row.status, row.attempts) == ("failed", 1)  # never retried: the client already had bytes
    # the frame says what a plain answer of the recorded error type says (its row of the one table)
    assert last["error"]["code"] == error_kind(row.error_type).code and row.error_type
    assert sim.request_counts()["gpt"] == {row.call_id: 1}
    with pytest.raises(openai.APIError):  # and the SDK raises on it
        client = openai.OpenAI(base_url=gateway + "/v1", api_key=key, max_retries=0)
        list(
            client.chat.completions.create(
                model="chat", messages=body["messages"], max_tokens=20, stream=True
            )
        )


def test_a_failure_before_the_first_chunk_is_retried_like_a_plain_call(sim_server, make_provider, make_route,
                                                                        team, sdk):  # fmt: skip
    sim = sim_server({"time_scale": 1, "providers": {"gpt": {**KINDS["gpt"], "status_script": [503, 200]}}})
    make_route(
        "chat", make_provider("gpt", base_url=sim.provider_url("gpt"), model="gpt-sim", rpm=6000, tpm=10**6)
    )
    client = sdk(create_api_key(team, "sdk")[1])
    started = time.monotonic()
    raw = client.chat.completions.with_raw_response.create(model="chat", messages=[{"role": "user", "content": "x"}],
                                                           max_tokens=8, stream=True)  # fmt: skip
    assert raw.headers["x-gateway-attempts"] == "2"
    assert "".join(c.choices[0].delta.content or "" for c in raw.parse() if c.choices).startswith("[gpt]")
    del started
    (row,) = logged_calls(1)
    assert [e["status_code"] for e in row.attempt_log] == [503, 200] and row.status == "succeeded"
