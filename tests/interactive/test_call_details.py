"""Interactive details: ``X-Gateway-Max-Wait: 0`` serves a call whose quota is there now and never waits
for a refill; an unknown model's hint speaks the request's own field (``model``). uvicorn +
gateway_site.asgi, the simulator, the openai SDK."""

from __future__ import annotations

import openai
import pytest

from teams.services import create_api_key

from .conftest import logged_calls
from .test_sdk import KINDS

pytestmark = pytest.mark.django_db(transaction=True)

NO_WAIT = {"X-Gateway-Max-Wait": "0"}


def test_a_max_wait_of_0_is_served_when_the_quota_is_there_and_never_waits_when_it_is_not(
    sim_server, make_provider, make_route, team, sdk
):
    sim = sim_server({"time_scale": 1, "providers": {"gpt": KINDS["gpt"]}})
    # rpm 60 with a 1 s burst: an idle gateway, one token in the bucket; the next needs a second of refill
    make_route("chat", make_provider("gpt", base_url=sim.provider_url("gpt"), model="gpt-sim", rpm=60,
                                     burst_seconds=1.0, tpm=10**6))  # fmt: skip
    client = sdk(create_api_key(team, "sdk")[1])
    answer = client.chat.completions.create(model="chat", messages=[{"role": "user", "content": "now"}],
                                            max_tokens=5, extra_headers=NO_WAIT)  # fmt: skip
    assert answer.choices[0].message.content
    with pytest.raises(openai.RateLimitError) as limited:
        client.chat.completions.create(model="chat", messages=[{"role": "user", "content": "later"}],
                                       max_tokens=5, extra_headers=NO_WAIT)  # fmt: skip
    assert limited.value.code == "gateway_queue_timeout"
    assert sum(sim.request_counts()["gpt"].values()) == 1  # the first was sent, the second never
    rows = logged_calls(2)
    assert [(r.status, r.http_status, r.attempts) for r in rows] == [
        ("succeeded", 200, 1),
        ("expired", 429, 0),
    ]


def test_an_unknown_models_hint_names_the_model_field(make_provider, make_route, team, sdk):
    make_route("chat", make_provider("gpt"))
    make_provider("claude-sonnet")
    client = sdk(create_api_key(team, "sdk")[1])
    for typo, meant in (("gtp", "gpt"), ("chta", "chat"), ("claude-sonet", "claude-sonnet")):
        with pytest.raises(openai.NotFoundError) as missing:
            client.chat.completions.create(model=typo, messages=[{"role": "user", "content": "x"}])
        error = missing.value
        assert (error.code, error.param) == ("model_not_found", "model")
        assert f"did you mean model {meant!r}?" in error.message, error.message
        assert '"provider"' not in error.message and '"route"' not in error.message, error.message
