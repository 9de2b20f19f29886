"""The documented shapes of the interactive lane (openai_api/interactive_schema.py) are what the real
server (uvicorn + gateway_site.asgi) answers: the field sets of /v1/models and a chat completion."""

from __future__ import annotations

import httpx
import pytest

from teams.services import create_api_key
from tests.openapi_checks import openapi_document

from .conftest import settled
from .test_sdk import KINDS

pytestmark = pytest.mark.django_db(transaction=True)


def properties(schemas: dict, name: str) -> set[str]:
    return set(schemas[name]["properties"])


def test_the_documented_shapes_are_what_the_lane_answers(
    sim_server, make_provider, make_route, team, gateway
):
    schemas = openapi_document()["components"]["schemas"]
    sim = sim_server({"time_scale": 1, "providers": {"gpt": KINDS["gpt"]}})
    gpt = make_provider("gpt", base_url=sim.provider_url("gpt"), model="gpt-sim", rpm=6000, tpm=10**6)
    make_route("chat", gpt)
    headers = {"Authorization": f"Bearer {create_api_key(team, 'k')[1]}"}
    settled()
    listed = httpx.get(gateway + "/v1/models", headers=headers, timeout=30).json()
    assert properties(schemas, "ModelList") == set(listed)
    assert all(properties(schemas, "Model") == set(m) for m in listed["data"]) and listed["data"]
    body = {"model": "chat", "messages": [{"role": "user", "content": "x"}], "max_tokens": 5}
    answer = httpx.post(gateway + "/v1/chat/completions", json=body, headers=headers, timeout=30)
    assert answer.status_code == 200, answer.text
    completion = answer.json()
    assert properties(schemas, "ChatCompletion") <= set(completion), set(completion)
    assert properties(schemas, "ChatCompletionUsage") <= set(completion["usage"])
    choice = completion["choices"][0]
    assert set(schemas["ChatCompletionChoice"]["required"]) <= set(choice)
    assert {"role", "content"} <= set(choice["message"])
    assert {"x-gateway-provider", "x-gateway-attempts"} <= set(answer.headers)
    refused = httpx.post(gateway + "/v1/chat/completions", json={"messages": []}, headers=headers, timeout=30)
    assert refused.status_code == 400
    assert properties(schemas, "OpenAIErrorDetail") == set(refused.json()["error"])
