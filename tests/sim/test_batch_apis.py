"""The simulator's batch APIs speak the providers' own protocols: the ``openai`` SDK (files + batches),
``openai.AzureOpenAI`` (global batch, api-version required) and the ``anthropic`` SDK (message batches)
drive them end to end and parse every answer into their own types; malformed requests and files are
refused the way the real APIs refuse them, counted in ``batch_shape_rejections``; none of it touches the
real-time counters or ``/_sim/requests``."""

from __future__ import annotations

import json

import anthropic
import httpx
import openai
import pytest

from sim.testing import run_simulator_in_thread
from tests.waiting import wait_until

KEY = "sk-sim"
DEPLOYMENT = "gpt-4o-gb"
CONFIG = {
    "time_scale": 1000,
    "seed": 3,
    "providers": {
        "oa": {"kind": "openai", "api_key": KEY, "batch_turnaround_ms": 20_000, "batch_max_requests": 5},
        "az": {
            "kind": "azure_openai",
            "api_key": KEY,
            "deployment": DEPLOYMENT,
            "batch_turnaround_ms": 20_000,
        },
        "an": {"kind": "anthropic", "api_key": KEY, "batch_turnaround_ms": 20_000, "batch_max_requests": 5},
    },
}


@pytest.fixture(scope="module")
def sim():
    with run_simulator_in_thread(CONFIG) as handle:
        yield handle


def chat(model: str = "m") -> dict:
    return {"model": model, "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]}


def jsonl(rows: list[dict]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def openai_lines(n: int, url: str = "/v1/chat/completions", model: str = "m") -> bytes:
    return jsonl(
        [{"custom_id": f"r{i}", "method": "POST", "url": url, "body": chat(model)} for i in range(n)]
    )


def test_openai_sdk_files_and_batches(sim):
    sim.reset()
    client = openai.OpenAI(base_url=sim.provider_url("oa"), api_key=KEY, max_retries=0)
    f = client.files.create(file=("in.jsonl", openai_lines(3)), purpose="batch")
    assert (f.purpose, f.filename, f.bytes) == ("batch", "in.jsonl", len(openai_lines(3)))
    batch = client.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions", completion_window="24h",
                                  metadata={"gateway_chunk": "k1"})  # fmt: skip
    assert batch.status in ("validating", "in_progress", "finalizing", "completed")
    assert batch.request_counts.total == 3
    done = wait_until(
        lambda: (b := client.batches.retrieve(batch.id)).status == "completed" and b, what="completed"
    )
    assert done.request_counts.completed == 3 and done.metadata == {"gateway_chunk": "k1"}
    assert done.completed_at is not None and done.in_progress_at is not None
    rows = [json.loads(x) for x in client.files.content(done.output_file_id).text.splitlines()]
    assert sorted(r["custom_id"] for r in rows) == ["r0", "r1", "r2"]
    assert {r["response"]["status_code"] for r in rows} == {200}
    assert rows[0]["response"]["body"]["object"] == "chat.completion"
    assert [b.id for b in client.batches.list(limit=10)] == [batch.id]
    with pytest.raises(openai.ConflictError):  # a completed batch cannot be cancelled
        client.batches.cancel(batch.id)
    seen = sim.provider_counters("oa")
    assert seen["requests"] == 0 and seen["batch_lines"] == 3 and seen["batch_shape_rejections"] == 1
    assert sim.request_counts()["oa"] == {} and sim.batch_lines()["oa"] == {"r0": 1, "r1": 1, "r2": 1}


def test_openai_sdk_refusals(sim):
    client = openai.OpenAI(base_url=sim.provider_url("oa"), api_key=KEY, max_retries=0)
    with pytest.raises(openai.BadRequestError, match="jsonl"):
        client.files.create(file=("in.txt", openai_lines(1)), purpose="batch")
    f = client.files.create(file=("in.jsonl", openai_lines(1)), purpose="batch")
    with pytest.raises(openai.BadRequestError, match="completion_window"):
        client.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions", completion_window="1h")  # type: ignore[arg-type]
    with pytest.raises(openai.BadRequestError, match="endpoint"):
        client.batches.create(input_file_id=f.id, endpoint="/v1/completions", completion_window="24h")  # type: ignore[arg-type]
    with pytest.raises(openai.NotFoundError):
        client.batches.create(
            input_file_id="file-nope", endpoint="/v1/chat/completions", completion_window="24h"
        )
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=sim.provider_url("oa"), api_key="bad", max_retries=0).batches.list()
    # a malformed file is accepted, then the batch fails while validating, each problem with its line (7
    # lines: more than this provider's batch_max_requests of 5, too)
    bad = jsonl([
        {"custom_id": "a", "method": "POST", "url": "/v1/chat/completions", "body": chat()},
        {"custom_id": "a", "method": "POST", "url": "/v1/chat/completions", "body": chat()},
        {"custom_id": "b", "method": "GET", "url": "/v1/chat/completions", "body": chat()},
        {"custom_id": "c", "method": "POST", "url": "/v1/embeddings", "body": chat()},
        {"custom_id": "d", "method": "POST", "url": "/v1/chat/completions", "body": chat("other")},
        {"custom_id": "e", "method": "POST", "url": "/v1/chat/completions", "body": {**chat(), "stream": True}},
    ]) + b"not json\n"  # fmt: skip
    f = client.files.create(file=("bad.jsonl", bad), purpose="batch")
    batch = client.batches.create(
        input_file_id=f.id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    failed = wait_until(
        lambda: (b := client.batches.retrieve(batch.id)).status == "failed" and b, what="failed"
    )
    codes = [(e.code, e.line) for e in failed.errors.data]
    assert codes == [("too_many_requests", 7), ("duplicate_custom_id", 2), ("invalid_request", 3), ("invalid_url", 4),
                     ("mismatched_model", 5), ("invalid_request", 6), ("invalid_json_line", 7)]  # fmt: skip
    assert failed.output_file_id is None and failed.failed_at is not None
    # more lines than batch_max_requests (5 here)
    f = client.files.create(file=("big.jsonl", openai_lines(6)), purpose="batch")
    batch = client.batches.create(
        input_file_id=f.id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    failed = wait_until(
        lambda: (b := client.batches.retrieve(batch.id)).status == "failed" and b, what="failed"
    )
    assert failed.errors.data[0].code == "too_many_requests"


def test_azure_sdk_global_batch(sim):
    sim.reset()
    client = openai.AzureOpenAI(azure_endpoint=f"{sim.base_url}/az", api_key=KEY, api_version="2024-10-21",
                                max_retries=0)  # fmt: skip
    f = client.files.create(
        file=("in.jsonl", openai_lines(2, "/chat/completions", DEPLOYMENT)), purpose="batch"
    )
    batch = client.batches.create(input_file_id=f.id, endpoint="/chat/completions", completion_window="24h")  # type: ignore[arg-type]
    done = wait_until(
        lambda: (b := client.batches.retrieve(batch.id)).status == "completed" and b, what="completed"
    )
    rows = [json.loads(x) for x in client.files.content(done.output_file_id).text.splitlines()]
    assert {r["response"]["body"]["model"] for r in rows} == {"az-chat"}  # the deployment's model answers
    assert [b.id for b in client.batches.list()] == [batch.id]
    # a line naming another deployment fails the batch
    f = client.files.create(file=("x.jsonl", openai_lines(1, "/chat/completions", "gpt-4o")), purpose="batch")
    batch = client.batches.create(input_file_id=f.id, endpoint="/chat/completions", completion_window="24h")  # type: ignore[arg-type]
    failed = wait_until(
        lambda: (b := client.batches.retrieve(batch.id)).status == "failed" and b, what="failed"
    )
    assert failed.errors.data[0].code == "model_not_found"
    # api-version is required (400 without it), an unknown one is Azure's 404, the key is checked
    no_version = httpx.get(f"{sim.base_url}/az/openai/batches", headers={"api-key": KEY})
    assert no_version.status_code == 400 and "api-version" in no_version.json()["error"]["message"]
    unknown = httpx.get(f"{sim.base_url}/az/openai/batches?api-version=1999-01-01", headers={"api-key": KEY})
    assert unknown.status_code == 404
    with pytest.raises(openai.AuthenticationError):
        openai.AzureOpenAI(azure_endpoint=f"{sim.base_url}/az", api_key="bad", api_version="2024-10-21",
                           max_retries=0).batches.list()  # fmt: skip
    assert sim.provider_counters("az")["requests"] == 0


def test_anthropic_sdk_message_batches(sim):
    sim.reset()
    client = anthropic.Anthropic(base_url=f"{sim.base_url}/an", api_key=KEY, max_retries=0)
    requests = [{"custom_id": f"chunk1-{i}", "params": {**chat(), "model": "claude-x"}} for i in range(4)]
    requests.append(
        {
            "custom_id": "chunk1-bad",
            "params": {"model": "claude-x", "messages": [{"role": "user", "content": "x"}]},
        }
    )
    batch = client.messages.batches.create(requests=requests)  # type: ignore[arg-type]
    assert batch.processing_status == "in_progress" and batch.request_counts.processing == 5
    done = wait_until(lambda: (b := client.messages.batches.retrieve(batch.id)).processing_status == "ended" and b,
                      what="ended")  # fmt: skip
    assert (done.request_counts.succeeded, done.request_counts.errored) == (4, 1)
    assert done.results_url and done.results_url.endswith(f"/{batch.id}/results") and done.ended_at
    results = list(client.messages.batches.results(batch.id))
    by_id = {r.custom_id: r.result for r in results}
    assert (
        by_id["chunk1-bad"].type == "errored"
        and by_id["chunk1-bad"].error.error.type == "invalid_request_error"
    )
    assert by_id["chunk1-0"].type == "succeeded" and by_id["chunk1-0"].message.usage.output_tokens == 4
    # out of order, as the API warns (the simulator never returns submission order)
    assert [r.custom_id for r in results] != sorted(by_id, key=lambda c: (len(c), c))
    assert [b.id for b in client.messages.batches.list(limit=10)] == [batch.id]
    assert sim.provider_counters("an")["requests"] == 0 and sim.request_counts()["an"] == {}


def test_anthropic_sdk_cancel_and_refusals(sim):
    client = anthropic.Anthropic(base_url=f"{sim.base_url}/an", api_key=KEY, max_retries=0)
    sim.set_config({**CONFIG, "providers": {**CONFIG["providers"], "an": {
        "kind": "anthropic", "api_key": KEY, "batch_turnaround_ms": 10_000_000, "batch_max_requests": 5}}})  # fmt: skip
    batch = client.messages.batches.create(requests=[{"custom_id": "a", "params": chat()}])  # type: ignore[list-item]
    canceling = client.messages.batches.cancel(batch.id)
    assert canceling.processing_status == "canceling" and canceling.cancel_initiated_at is not None
    done = wait_until(lambda: (b := client.messages.batches.retrieve(batch.id)).processing_status == "ended" and b,
                      what="ended")  # fmt: skip
    assert done.request_counts.canceled == 1
    assert [r.result.type for r in client.messages.batches.results(batch.id)] == ["canceled"]
    bad_ids = [{"custom_id": "has space", "params": chat()}]
    with pytest.raises(anthropic.BadRequestError, match="custom_id"):
        client.messages.batches.create(requests=bad_ids)  # type: ignore[arg-type]
    with pytest.raises(anthropic.BadRequestError, match="unique"):
        client.messages.batches.create(requests=[{"custom_id": "a", "params": chat()}] * 2)  # type: ignore[list-item]
    with pytest.raises(anthropic.BadRequestError, match="at most 5"):
        client.messages.batches.create(requests=[{"custom_id": f"x{i}", "params": chat()} for i in range(6)])  # type: ignore[misc]
    with pytest.raises(anthropic.BadRequestError, match="at least 1"):
        client.messages.batches.create(requests=[])
    with pytest.raises(anthropic.AuthenticationError):
        anthropic.Anthropic(
            base_url=f"{sim.base_url}/an", api_key="bad", max_retries=0
        ).messages.batches.list()
    assert sim.provider_counters("an")["batch_shape_rejections"] == 4
    sim.set_config(CONFIG)


def test_batch_options_are_refused_where_they_mean_nothing():
    from sim.config import ConfigError, parse_config

    def refused(provider: dict) -> str:
        with pytest.raises(ConfigError) as caught:
            parse_config({"providers": {"p": provider}})
        return str(caught.value)

    assert "providers.p.batch_turnaround_ms: kind gemini has no batch API" in refused(
        {"kind": "gemini", "batch_turnaround_ms": 10}
    )
    assert "providers.p.batch_deployment: not an option of kind openai" in refused({"batch_deployment": "x"})
    assert "providers.p.batch_line_error_rate: must be <= 1" in refused({"batch_line_error_rate": 2})
    assert "providers.p.batch_progress: expected a boolean" in refused({"batch_progress": "yes"})
    cfg = parse_config({"providers": {"a": {"kind": "azure_openai", "deployment": "d"},
                                      "b": {"kind": "anthropic"}}})  # fmt: skip
    assert cfg.providers["a"].batch.deployment == "d" and cfg.providers["a"].batch.max_requests == 50_000
    assert (
        cfg.providers["b"].batch.max_requests == 100_000
        and cfg.providers["b"].batch.max_bytes == 256 * 1024 * 1024
    )


def test_anthropic_results_are_never_in_submission_order():
    """A plain shuffle of five rows comes back in order once in 120 batch ids (CI saw it); the simulator
    must show the disorder the API warns of every time, or a client relying on order passes by luck."""
    import random

    from sim.batches_anthropic import _out_of_order

    rows = [f"chunk1-{i}" for i in range(5)]
    orders = [_out_of_order(rows, random.Random(f"seed:{n}:order")) for n in range(600)]
    assert all(order != rows and sorted(order) == rows for order in orders)
    assert len({tuple(order) for order in orders}) > 50  # still a shuffle, not a fixed rotation
    assert _out_of_order(["only"], random.Random(1)) == ["only"]
