"""``/v1/batches`` with ``endpoint: "/v1/responses"`` through the unmodified openai SDK (Django's live server,
the batch run in-process, the simulator): Responses lines become chat items the providers of both kinds are
sent in their own shape; the output file's ``response.body`` parses as the SDK's Response objects; a line
the gateway cannot carry fails the batch with an error naming the line and its field, nothing run."""

from __future__ import annotations

import json

import pytest
from openai.types.responses import Response

from batches.models import Batch
from sim.testing import run_simulator_in_thread
from teams.services import create_api_key

from .conftest import jsonl, read_jsonl

pytestmark = pytest.mark.django_db(transaction=True)

FAST = {"median_ms": 3, "sigma": 0.1, "max_concurrency": 50, "completion_tokens": 5}
SIM = {"time_scale": 1, "trace_tag_regex": r"tag-(\w+)", "providers": {
    "gpt": {"kind": "openai", "model": "gpt-sim", "rpm": 6000, "tpm": 1_000_000, **FAST},
    "claude": {"kind": "anthropic", "model": "claude-sim", "rpm": 6000, "itpm": 1_000_000, "otpm": 100_000, **FAST},
}}  # fmt: skip


def line(custom_id: str, model: str, **body) -> dict:
    return {
        "custom_id": custom_id,
        "method": "POST",
        "url": "/v1/responses",
        "body": {"model": model, **body},
    }


def test_a_responses_batch_answers_response_objects(sdk, team, make_provider, make_route, redis_sync):
    client = sdk(create_api_key(team, "sdk")[1])
    with run_simulator_in_thread(SIM) as sim:
        make_route("r-gpt", make_provider("gpt", base_url=sim.kind_url("gpt", "openai"), model="gpt-sim",
                                          rpm=6000, tpm=10**6, max_concurrency=20))  # fmt: skip
        make_route("r-claude", make_provider("claude", kind="anthropic", base_url=sim.kind_url("claude", "anthropic"),
                                             model="claude-sim", rpm=6000, tpm=10**6, itpm=10**6, otpm=10**5,
                                             max_concurrency=20))  # fmt: skip
        lines = [
            line("a", "r-gpt", input="first tag-a", instructions="Be brief.", max_output_tokens=8),
            line("b", "r-claude", input=[{"role": "user", "content": [{"type": "input_text", "text": "second tag-b"}]}],
                 max_output_tokens=8),
            line("c", "r-gpt", input=[
                {"role": "user", "content": "weather?"},
                {"type": "function_call", "call_id": "call_1", "name": "weather", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
                {"role": "user", "content": "so? tag-c"}],
                 tools=[{"type": "function", "name": "weather", "parameters": {"type": "object", "properties": {}}}]),
        ]  # fmt: skip
        uploaded = client.files.create(file=jsonl(lines), purpose="batch")
        batch = client.batches.create(
            input_file_id=uploaded.id, endpoint="/v1/responses", completion_window="24h"
        )
        batch = client.batches.retrieve(batch.id)
        assert batch.status == "completed" and batch.endpoint == "/v1/responses", batch
        assert batch.request_counts.completed == 3 and batch.error_file_id is None
        assert sim.shape_rejections() == {"gpt": 0, "claude": 0}
        seen = {row["tag"]: row for row in sim.trace()}
    assert set(seen) == {"a", "b", "c"} and seen["b"]["provider"] == "claude"
    output = {x["custom_id"]: x for x in read_jsonl(client.files.content(batch.output_file_id).text)}
    for custom_id, expected in (("a", "gpt"), ("b", "claude"), ("c", "gpt")):
        body = output[custom_id]["response"]["body"]
        response = Response.model_validate(body)  # the SDK's own type, validated
        assert response.object == "response" and response.id.startswith("resp_")
        assert response.output_text.startswith(f"[{expected}]") and response.status == "completed"
        assert response.usage.total_tokens == response.usage.input_tokens + response.usage.output_tokens
    assert seen["a"]["tokens"] == output["a"]["response"]["body"]["usage"]["input_tokens"] + 8
    items = Batch.objects.get(openai_batch__id=batch.id).items.order_by("custom_id")
    assert items[0].payload["messages"][0] == {"role": "system", "content": "Be brief."}
    assert items[0].payload["params"] == {"max_completion_tokens": 8}
    replayed = items[2].payload["messages"]
    assert replayed[1]["tool_calls"][0]["id"] == "call_1" and replayed[2]["role"] == "tool"


def test_a_line_the_gateway_cannot_carry_names_its_line_and_field(sdk, team, make_provider, make_route):
    client = sdk(create_api_key(team, "sdk")[1])
    make_route("r-gpt", make_provider("gpt", rpm=6000, tpm=10**6))
    lines = [line("ok", "r-gpt", input="fine"), line("bad", "r-gpt", input="x", previous_response_id="resp_1"),
             line("worse", "r-gpt", input="x", stream=True)]  # fmt: skip
    uploaded = client.files.create(file=jsonl(lines), purpose="batch")
    batch = client.batches.create(
        input_file_id=uploaded.id, endpoint="/v1/responses", completion_window="24h"
    )
    assert batch.status == "failed"
    errors = [(e.line, e.param) for e in batch.errors.data]
    assert errors == [(2, "body.previous_response_id"), (3, "body.stream")]
    assert not Batch.objects.exists()  # nothing stored, nothing run
    json.dumps(batch.model_dump())  # the batch object is plain JSON
