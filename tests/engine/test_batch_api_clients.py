"""The provider batch-API clients (gateway_engine.batch_api) against the simulator's batch APIs, for the
three kinds: create -> poll -> results -> cancel -> list_since, expiry, a refused file, line errors and
their classification, the exact bytes sent, and the create gap a crash can land in. The assertions are on
what the simulator saw (its batch counters, its per-custom-id line counts, the uploaded file's bytes)."""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import pytest

from gateway_engine.batch_api import (
    STATES,
    BatchApiError,
    BatchLine,
    BatchTarget,
    adoption_matches,
    for_target,
    line_verdict,
)
from gateway_engine.batch_api.client import BatchApiClient
from gateway_engine.http_batch import BatchHttp
from sim.testing import run_simulator_in_thread
from tests.waiting import wait_until_async

KINDS = ("openai", "azure_openai", "anthropic")
KEY = "sk-test"
DEPLOYMENT = "gpt-4o-batch"
FAST = {"api_key": KEY, "batch_turnaround_ms": 20_000}  # 20 ms real at time_scale 1000
CONFIG = {
    "time_scale": 1000,
    "seed": 7,
    "providers": {
        "oa": {"kind": "openai", **FAST},
        "az": {"kind": "azure_openai", "deployment": DEPLOYMENT, **FAST},
        "an": {"kind": "anthropic", **FAST},
        # lines finish one by one over ~1.6 s real: a cancel returns part of them
        "oa_slow": {
            "kind": "openai",
            "api_key": KEY,
            "batch_turnaround_ms": 2_000_000,
            "batch_progress": True,
        },
        "an_slow": {
            "kind": "anthropic",
            "api_key": KEY,
            "batch_turnaround_ms": 2_000_000,
            "batch_progress": True,
        },
        # the window (1 ms real) ends long before the turnaround (50 ms real)
        "oa_late": {"kind": "openai", "api_key": KEY, "batch_turnaround_ms": 50_000, "batch_window_ms": 1000},
        "az_late": {
            "kind": "azure_openai",
            "api_key": KEY,
            "deployment": DEPLOYMENT,
            "batch_turnaround_ms": 50_000,
            "batch_window_ms": 1000,
        },  # fmt: skip
        "an_late": {
            "kind": "anthropic",
            "api_key": KEY,
            "batch_turnaround_ms": 50_000,
            "batch_window_ms": 1000,
        },
        "oa_err": {
            "kind": "openai",
            "api_key": KEY,
            "batch_turnaround_ms": 10_000,
            "batch_line_error_rate": 0.5,
        },
        "an_err": {
            "kind": "anthropic",
            "api_key": KEY,
            "batch_turnaround_ms": 10_000,
            "batch_line_error_rate": 0.5,
        },
        # the create call answers 300 ms real after the batch is stored
        "oa_gap": {"kind": "openai", "api_key": KEY, "batch_create_delay_ms": 300_000},
        "an_gap": {"kind": "anthropic", "api_key": KEY, "batch_create_delay_ms": 300_000},
        # a results download answers 300 ms real after it was asked
        "oa_dl": {
            "kind": "openai",
            "api_key": KEY,
            "batch_turnaround_ms": 10_000,
            "batch_download_delay_ms": 300_000,
        },
        "an_dl": {
            "kind": "anthropic",
            "api_key": KEY,
            "batch_turnaround_ms": 10_000,
            "batch_download_delay_ms": 300_000,
        },  # fmt: skip
    },
}


@pytest.fixture(scope="module")
def sim():
    with run_simulator_in_thread(CONFIG) as handle:
        yield handle


def target(sim, name: str, kind: str, **overrides) -> BatchTarget:
    azure = kind == "azure_openai"
    fields = dict(kind=kind, base_url=sim.kind_url(name, kind), api_key=KEY,
                  api_version="2024-10-21" if azure else None, batch_deployment=DEPLOYMENT if azure else None,
                  model="m")  # fmt: skip
    fields.update(overrides)
    return BatchTarget(**fields)


def body(kind: str, text: str = "hello", **extra) -> dict:
    b = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": text}]}
    return {**b, **extra}


def lines(chunk: str, n: int, kind: str) -> list[BatchLine]:
    return [BatchLine(f"{chunk}-{i}", body(kind, f"line {i}")) for i in range(n)]


def name_of(kind: str, suffix: str = "") -> str:
    return {"openai": "oa", "azure_openai": "az", "anthropic": "an"}[kind] + suffix


async def until_ended(client: BatchApiClient, remote_id: str, timeout: float = 10.0):
    async def ended():
        remote = await client.get(remote_id)
        return remote if remote.ended else None

    return await wait_until_async(ended, timeout=timeout, interval=0.01, what=f"batch {remote_id} ended")


def run(coro):
    return asyncio.run(coro)


@pytest.mark.parametrize("kind", KINDS)
def test_create_poll_results_and_list_since(sim, kind):
    name = name_of(kind)
    sim.reset()
    since = time.time()

    async def scenario():
        client = for_target(target(sim, name, kind))
        try:
            created = await client.create(f"c{kind[:2]}", lines(f"c{kind[:2]}", 6, kind))
            done = await until_ended(client, created.id)
            results = await client.results(done)
            listed = await client.list_since(since)
            later = await client.list_since(time.time() + 5)
            return created, done, results, listed, later, client.http_calls
        finally:
            await client.aclose()

    created, done, results, listed, later, calls = run(scenario())
    assert created.state in STATES and created.total == 6
    assert (done.state, done.ended, done.total, done.succeeded, done.errored) == ("ended", True, 6, 6, 0)
    assert created.expires_at is not None and created.expires_at > created.created_at
    ids = sorted(r.custom_id for r in results)
    assert ids == sorted(f"c{kind[:2]}-{i}" for i in range(6))
    assert {r.outcome for r in results} == {"succeeded"} and {r.status_code for r in results} == {200}
    native = results[0].body
    assert native is not None
    if kind == "anthropic":
        assert native["type"] == "message" and native["usage"]["output_tokens"] == 5
    else:
        assert native["object"] == "chat.completion" and native["usage"]["completion_tokens"] == 5
        assert done.metadata == {"gateway_chunk": f"c{kind[:2]}"} and done.output_file_id
    assert [b.id for b in listed] == [created.id] and later == []
    seen = sim.provider_counters(name)
    assert seen["batches_created"] == 1 and seen["batch_lines"] == 6 and seen["batch_lines_succeeded"] == 6
    assert seen["batch_api_calls"] == calls and seen["batch_shape_rejections"] == 0
    assert seen["requests"] == 0  # no real-time chat call
    assert sim.request_counts()[name] == {}
    assert sim.batch_lines()[name] == {f"c{kind[:2]}-{i}": 1 for i in range(6)}


@pytest.mark.parametrize("kind", ("openai", "anthropic"))
def test_cancel_returns_partial_output(sim, kind):
    name = name_of(kind, "_slow")

    async def scenario():
        client = for_target(target(sim, name, kind))
        try:
            created = await client.create("cx", lines("cx", 10, kind))

            async def some_done():
                remote = await client.get(created.id)
                return remote.succeeded >= 2

            await wait_until_async(some_done, timeout=10, interval=0.01, what="two lines done")
            cancelling = await client.cancel(created.id)
            done = await until_ended(client, created.id)
            return cancelling, done, await client.results(done)
        finally:
            await client.aclose()

    cancelling, done, results = run(scenario())
    assert cancelling.state in ("canceling", "cancelled")
    assert done.state == "cancelled" and done.ended
    outcomes = [r.outcome for r in results]
    succeeded = outcomes.count("succeeded")
    assert 2 <= succeeded < 10
    if kind == "anthropic":  # every line is reported; the unfinished ones canceled
        assert outcomes.count("canceled") == 10 - succeeded and done.canceled == 10 - succeeded
    else:  # OpenAI: the finished lines in the output file, the rest in no file
        assert len(results) == succeeded
    seen = sim.provider_counters(name)
    assert seen["batches_cancelled"] >= 1 and seen["batch_lines_canceled"] >= 10 - succeeded


@pytest.mark.parametrize("kind", KINDS)
def test_the_window_ends_late_batches_except_on_azure(sim, kind):
    name = name_of(kind, "_late")

    async def scenario():
        client = for_target(target(sim, name, kind))
        try:
            created = await client.create("cw", lines("cw", 3, kind))
            done = await until_ended(client, created.id)
            return done, await client.results(done)
        finally:
            await client.aclose()

    done, results = run(scenario())
    if kind == "azure_openai":  # Azure does not expire late jobs: it finishes them past the window
        assert done.state == "ended" and [r.outcome for r in results] == ["succeeded"] * 3
        assert done.expires_at is not None and done.expires_at < time.time()
    else:
        assert done.state == "expired"
        assert sorted(r.custom_id for r in results) == ["cw-0", "cw-1", "cw-2"]
        assert {r.outcome for r in results} == {"expired"}


def test_a_refused_file_fails_the_batch_with_errors(sim):
    sim.reset()

    async def scenario():
        bad = [BatchLine("f-0", body("openai")), BatchLine("f-1", {"model": "m", "messages": []})]
        client = for_target(target(sim, "oa", "openai"))
        wrong = for_target(target(sim, "az", "azure_openai", batch_deployment="not-a-batch-deployment"))
        try:
            a = await until_ended(client, (await client.create("fa", bad)).id)
            b = await until_ended(wrong, (await wrong.create("fb", lines("fb", 2, "azure_openai"))).id)
            return a, await client.results(a), b
        finally:
            await client.aclose()
            await wrong.aclose()

    failed, results, wrong_model = run(scenario())
    assert failed.state == "failed" and failed.ended and results == []
    assert [(e["code"], e["line"]) for e in failed.errors] == [("invalid_request", 2)]
    assert "messages" in failed.errors[0]["message"]
    assert wrong_model.state == "failed" and wrong_model.errors[0]["code"] == "model_not_found"
    assert sim.provider_counters("oa")["batches_failed"] == 1


@pytest.mark.parametrize("kind", ("openai", "anthropic"))
def test_line_errors_and_their_verdicts(sim, kind):
    name = name_of(kind, "_err")

    async def scenario():
        client = for_target(target(sim, name, kind))
        try:
            batch = lines("ce", 20, kind)
            if (
                kind == "anthropic"
            ):  # params the Messages API refuses: errored, asynchronously, as the API does
                batch.append(
                    BatchLine("ce-bad", {"model": "m", "messages": [{"role": "user", "content": "x"}]})
                )
            done = await until_ended(client, (await client.create("ce", batch)).id)
            return done, await client.results(done)
        finally:
            await client.aclose()

    done, results = run(scenario())
    errored = [r for r in results if r.outcome == "errored" and r.custom_id != "ce-bad"]
    assert 0 < len(errored) < 20  # the simulator's 0.5 line error rate, drawn per line
    assert {r.status_code for r in errored} == {500}
    verdicts = {line_verdict(kind, r) for r in errored}
    assert all(v is not None and v.retryable and v.error_type == "server_error" for v in verdicts)
    assert all(line_verdict(kind, r) is None for r in results if r.outcome == "succeeded")
    if kind == "anthropic":
        (bad,) = [r for r in results if r.custom_id == "ce-bad"]
        verdict = line_verdict(kind, bad)
        assert bad.status_code == 400 and "max_tokens" in (bad.error or {})["message"]
        assert verdict is not None and not verdict.retryable and verdict.error_type == "client_error"
    assert done.errored == sum(1 for r in results if r.outcome == "errored")


def test_call_errors_are_classified(sim):
    async def scenario():
        errors = []
        for t in (target(sim, "oa", "openai", api_key="wrong"),
                  target(sim, "az", "azure_openai", api_version="1999-01-01"),
                  target(sim, "an", "anthropic", anthropic_version="1999-01-01"),
                  BatchTarget("openai", "http://127.0.0.1:9/x/v1", KEY, None, None, "m", timeout_s=5)):  # fmt: skip
            client = for_target(t)
            try:
                await client.get("batch_x")
            except BatchApiError as exc:
                errors.append(exc)
            finally:
                await client.aclose()
        return errors

    wrong_key, unknown_version, bad_header, refused = run(scenario())
    assert (wrong_key.status, wrong_key.retryable, wrong_key.error_type) == (401, False, "client_error")
    assert (unknown_version.status, unknown_version.retryable) == (404, False)
    assert (bad_header.status, bad_header.retryable) == (400, False)
    assert (refused.status, refused.retryable, refused.error_type) == (None, True, "connection_error")
    assert sim.provider_counters("oa")["batch_auth_rejections"] >= 1


def test_encoded_lines_are_exactly_what_is_sent(sim):
    sim.reset()
    unicode_body = body("openai", "héllo ✓")
    az_line = BatchLine("az-1", unicode_body)

    async def scenario():
        oa = for_target(target(sim, "oa", "openai"))
        az = for_target(target(sim, "az", "azure_openai"))
        an = for_target(target(sim, "an", "anthropic"))
        try:
            sent = [BatchLine("oa-1", unicode_body), BatchLine("oa-2", body("openai"))]
            created = await oa.create("enc", sent)
            return oa, az, an, created, sent
        finally:
            await oa.aclose()

    oa, az, an, created, sent = run(scenario())
    az_row = json.loads(az.encode_line(az_line))
    assert az_row == {"custom_id": "az-1", "method": "POST", "url": "/chat/completions",
                      "body": {**unicode_body, "model": DEPLOYMENT}}  # fmt: skip
    oa_row = json.loads(oa.encode_line(sent[0]))
    assert oa_row["url"] == "/v1/chat/completions" and oa_row["body"] == unicode_body
    an_bytes = an.encode_line(BatchLine("an-1", body("anthropic")))
    assert an_bytes.endswith(b",") and json.loads(an_bytes[:-1]) == {
        "custom_id": "an-1",
        "params": body("anthropic"),
    }
    assert an.envelope_bytes == len(b'{"requests":[]}') - 1 and oa.envelope_bytes == 0
    with pytest.raises(ValueError, match="custom_id"):
        an.encode_line(BatchLine("has space", body("anthropic")))
    # the uploaded input file is byte for byte the encoded lines (what batch_max_bytes is checked against)
    info = httpx.get(
        f"{sim.kind_url('oa', 'openai')}/batches/{created.id}", headers={"Authorization": f"Bearer {KEY}"}
    ).json()
    uploaded = httpx.get(f"{sim.kind_url('oa', 'openai')}/files/{info['input_file_id']}/content",
                         headers={"Authorization": f"Bearer {KEY}"}).content  # fmt: skip
    assert uploaded == b"".join(oa.encode_line(line) for line in sent)
    meta = httpx.get(f"{sim.kind_url('oa', 'openai')}/files/{info['input_file_id']}",
                     headers={"Authorization": f"Bearer {KEY}"}).json()  # fmt: skip
    assert meta["filename"] == "enc.jsonl" and meta["purpose"] == "batch"


@pytest.mark.parametrize("kind", ("openai", "anthropic"))
def test_a_create_cut_off_in_the_gap_left_a_batch_to_adopt(sim, kind):
    """The simulator stores the batch, then waits before answering: a caller that gives up (or dies) in
    the gap has no id, but list_since finds the batch and adoption_matches picks it (OpenAI by its chunk
    metadata, Anthropic by time and request count); a second same-sized Anthropic batch makes it
    ambiguous (two matches: the caller must not create again)."""
    name = name_of(kind, "_gap")
    sim.reset()
    since = time.time()

    async def scenario():
        http = BatchHttp(timeout_s=0.05)
        client = for_target(target(sim, name, kind), http=http)
        try:
            with pytest.raises(BatchApiError) as cut:
                await client.create("gap1", lines("gap1", 4, kind))
            found = await client.list_since(since)
            with pytest.raises(BatchApiError):
                await client.create("gap2", lines("gap2", 4, kind))
            return cut.value, found, await client.list_since(since)
        finally:
            await http.aclose()

    cut, found, both = run(scenario())
    assert cut.retryable and cut.error_type == "timeout"
    assert len(found) == 1 and found[0].total == 4
    assert adoption_matches(kind, found, "gap1", since, 4) == found
    assert adoption_matches(kind, found, "gap1", since, 5) == ([] if kind == "anthropic" else found)
    assert adoption_matches(kind, found, "gap1", time.time() + 5, 4) == []
    if kind == "openai":
        assert found[0].metadata == {"gateway_chunk": "gap1"}
        assert [b.metadata["gateway_chunk"] for b in adoption_matches(kind, both, "gap2", since, 4)] == [
            "gap2"
        ]
    else:  # no metadata: two batches of the same size since the intent are ambiguous
        assert len(adoption_matches(kind, both, "gap2", since, 4)) == 2
    assert sim.provider_counters(name)["batches_created"] == 2
    assert sim.batch_lines()[name] == {f"gap{c}-{i}": 1 for c in (1, 2) for i in range(4)}


@pytest.mark.parametrize("kind", ("openai", "anthropic"))
def test_a_download_cut_off_can_be_read_again_with_the_same_lines(sim, kind):
    name = name_of(kind, "_dl")
    sim.reset()

    async def scenario():
        client = for_target(target(sim, name, kind))
        short = BatchHttp(timeout_s=0.05)
        hasty = for_target(target(sim, name, kind), http=short)
        try:
            done = await until_ended(client, (await client.create("dl", lines("dl", 5, kind))).id)
            with pytest.raises(BatchApiError) as cut:
                await hasty.results(done)
            return cut.value, await client.results(done), await client.results(done)
        finally:
            await client.aclose()
            await short.aclose()

    cut, first, second = run(scenario())
    assert cut.retryable and cut.error_type == "timeout"
    assert sorted((r.custom_id, r.outcome) for r in first) == sorted((r.custom_id, r.outcome) for r in second)
    assert sorted(r.custom_id for r in first) == [f"dl-{i}" for i in range(5)]
    assert sim.provider_counters(name)["batch_results_downloads"] == 3
