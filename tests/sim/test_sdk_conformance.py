"""The providers' own SDKs (PyPI: anthropic, google-genai, openai.AzureOpenAI) pointed at the simulator: their
requests pass its validation (0 shape rejections), they parse its answers into their own types, and its
errors into their own exception classes. So the simulator is as strict as the real API — not merely as
strict as the gateway — and a gateway translation bug the SDK would not make fails against it.

Every SDK runs with retries off (``max_retries=0`` / one attempt), so each call is one request."""

from __future__ import annotations

import pytest

anthropic = pytest.importorskip("anthropic")
genai = pytest.importorskip("google.genai")
openai = pytest.importorskip("openai")
from google.genai import errors as genai_errors  # noqa: E402
from google.genai import types as genai_types  # noqa: E402

CONFIG = {
    "providers": {
        "claude": {"kind": "anthropic", "model": "claude-sim", "api_key": "ak", "median_ms": 0,
                   "cache_read_ratio": 0.5, "cache_write_ratio": 0.25},
        "claude_busy": {"kind": "anthropic", "model": "claude-sim", "median_ms": 0,
                        "error_script": ["overloaded", "rate_limit", "spend_429", "spend_402", "ok"]},
        "claude_slow": {"kind": "anthropic", "model": "claude-sim", "median_ms": 0, "rpm": 1, "itpm": 100000},
        "gem": {"kind": "gemini", "model": "gemini-sim", "api_key": "gk", "median_ms": 0, "cache_read_ratio": 0.5},
        "gem_busy": {"kind": "gemini", "model": "gemini-sim", "median_ms": 0,
                     "error_script": ["per_minute", "per_day", "overloaded", "ok"]},
        "az": {"kind": "azure_openai", "model": "gpt-4o-sim", "deployment": "dep", "api_key": "zk",
               "median_ms": 0, "api_version": "2024-10-21", "rpm": 60, "window_seconds": 10},
        "az_stream": {"kind": "azure_openai", "model": "gpt-4o-sim", "deployment": "dep", "api_key": "zk",
                      "median_ms": 0, "api_version": "2024-10-21"},
        "gpt": {"model": "gpt-sim", "api_key": "ok", "median_ms": 0, "completion_tokens": 3},
    }
}  # fmt: skip


@pytest.fixture(scope="module")
def sim():
    from sim.testing import run_simulator_in_thread

    with run_simulator_in_thread(CONFIG) as handle:
        yield handle


def claude(sim, name="claude", key="ak"):
    return anthropic.Anthropic(base_url=f"{sim.base_url}/{name}", api_key=key, max_retries=0)


def gemini(sim, name="gem", key="gk"):
    options = genai_types.HttpOptions(base_url=f"{sim.base_url}/{name}", api_version="v1beta",
                                      retry_options=genai_types.HttpRetryOptions(attempts=1))  # fmt: skip
    return genai.Client(api_key=key, http_options=options)


def azure(sim, key="zk", api_version="2024-10-21", name="az"):
    return openai.AzureOpenAI(azure_endpoint=f"{sim.base_url}/{name}", api_version=api_version, api_key=key,
                              max_retries=0)  # fmt: skip


def gpt(sim):
    return openai.OpenAI(base_url=sim.provider_url("gpt"), api_key="ok", max_retries=0)


def test_anthropic_sdk_passes_validation_and_parses_the_message(sim):
    msg = claude(sim).messages.create(
        model="claude-sim", max_tokens=16, system="Be terse.", stop_sequences=["END"], metadata={"user_id": "u1"}, messages=[{"role": "user", "content": "hello world, how are you"},
                                          {"role": "assistant", "content": "Fine"},
                                          {"role": "user", "content": [{"type": "text", "text": "and?"}]}],
    )  # fmt: skip
    assert isinstance(msg, anthropic.types.Message)
    assert msg.content[0].type == "text" and msg.content[0].text.startswith("[claude]")
    assert msg.stop_reason == "max_tokens" and msg.usage.output_tokens == 16
    u = (
        msg.usage
    )  # system + messages: 41 characters -> 11 tokens; half read from the cache, a quarter written
    assert (u.input_tokens, u.cache_read_input_tokens, u.cache_creation_input_tokens) == (4, 5, 2)
    assert sim.shape_rejections()["claude"] == 0


def test_anthropic_sdk_maps_the_simulators_errors_to_its_classes(sim):
    client = claude(sim, "claude_busy", key="any")
    body = {"model": "claude-sim", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]}
    with pytest.raises(anthropic.OverloadedError) as overloaded:
        client.messages.create(**body)
    assert overloaded.value.status_code == 529 and isinstance(overloaded.value, anthropic.InternalServerError)
    with pytest.raises(anthropic.RateLimitError) as limited:
        client.messages.create(**body)
    assert limited.value.response.headers["retry-after"] == "1"
    with pytest.raises(anthropic.EnforcedSpendLimitReachedError):  # error.details.error_code
        client.messages.create(**body)
    with pytest.raises(anthropic.PaymentRequiredError) as billing:
        client.messages.create(**body)
    assert billing.value.body["error"]["type"] == "billing_error"
    assert client.messages.create(**body).stop_reason == "max_tokens"  # the script's "ok"
    with pytest.raises(anthropic.BadRequestError) as bad:  # a param the Messages API does not take
        client.messages.create(**body, extra_body={"response_format": {"type": "json_object"}})
    assert bad.value.body["error"]["message"] == "response_format: Extra inputs are not permitted"
    # the SDK speaks anthropic-version 2026-10-21, which has no sampling params (the gateway sends 2023-06-01)
    with pytest.raises(anthropic.BadRequestError, match="`temperature` is not supported in API version"):
        client.messages.create(**body, extra_body={"temperature": 0.5})
    assert sim.shape_rejections()["claude_busy"] == 2
    keyed = claude(sim, "claude", key="wrong")
    with pytest.raises(anthropic.AuthenticationError) as auth:
        keyed.messages.create(**body)
    assert auth.value.body["error"]["message"] == "invalid x-api-key"


def test_anthropic_sdk_reads_a_429_with_its_retry_after_and_rfc3339_resets(sim):
    client = claude(sim, "claude_slow", key="any")
    body = {"model": "claude-sim", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]}
    raw = client.messages.with_raw_response.create(**body)
    assert raw.headers["anthropic-ratelimit-requests-limit"] == "1"
    assert raw.headers["anthropic-ratelimit-input-tokens-reset"].endswith("Z")
    with pytest.raises(anthropic.RateLimitError) as limited:
        client.messages.create(**body)
    assert int(limited.value.response.headers["retry-after"]) >= 1
    assert limited.value.body["error"]["type"] == "rate_limit_error"


def test_genai_sdk_passes_validation_and_parses_the_answer(sim):
    config = genai_types.GenerateContentConfig(system_instruction="Be terse.", max_output_tokens=6,
                                               temperature=1.5, top_p=0.9, stop_sequences=["END"])  # fmt: skip
    client = gemini(sim)  # held: a client collected mid-call closes its connection pool
    response = client.models.generate_content(model="gemini-sim", contents="hello world, how are you",
                                                   config=config)  # fmt: skip
    assert response.text.startswith("[gem]")
    assert response.candidates[0].finish_reason == genai_types.FinishReason.MAX_TOKENS
    usage = response.usage_metadata  # 33 characters -> 9 tokens, half of them cached
    assert (usage.prompt_token_count, usage.candidates_token_count, usage.cached_content_token_count) == (
        9,
        6,
        4,
    )
    assert sim.shape_rejections()["gem"] == 0


def test_genai_sdk_maps_quota_and_overload_errors(sim):
    client = gemini(sim, "gem_busy", key="any")
    with pytest.raises(genai_errors.ClientError) as per_minute:
        client.models.generate_content(model="gemini-sim", contents="hi")
    assert per_minute.value.code == 429 and per_minute.value.status == "RESOURCE_EXHAUSTED"
    quota = [d for d in per_minute.value.details["error"]["details"] if d["@type"].endswith("QuotaFailure")]
    assert quota[0]["violations"][0]["quotaId"] == "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"
    with pytest.raises(genai_errors.ClientError) as per_day:
        client.models.generate_content(model="gemini-sim", contents="hi")
    assert "PerDay" in str(per_day.value.details)
    with pytest.raises(genai_errors.ServerError) as overloaded:
        client.models.generate_content(model="gemini-sim", contents="hi")
    assert overloaded.value.code == 503 and overloaded.value.status == "UNAVAILABLE"
    blocked = client.models.generate_content(model="gemini-sim", contents="[[sim:blocked]] hi")
    assert (
        blocked.candidates is None
        and blocked.prompt_feedback.block_reason == genai_types.BlockedReason.SAFETY
    )
    with pytest.raises(genai_errors.ClientError) as bad:  # maxOutputTokens must be >= 1
        client.models.generate_content(model="gemini-sim", contents="hi",
                                       config=genai_types.GenerateContentConfig(temperature=2.5))  # fmt: skip
    assert bad.value.code == 400 and bad.value.status == "INVALID_ARGUMENT"
    with pytest.raises(genai_errors.ClientError) as not_found:
        client.models.generate_content(model="gemini-other", contents="hi")
    assert not_found.value.code == 404
    keyed = gemini(sim, key="wrong")  # held: a client collected mid-call closes its connection pool
    with pytest.raises(genai_errors.ClientError) as bad_key:
        keyed.models.generate_content(model="gemini-sim", contents="hi")
    assert bad_key.value.code == 400 and "API key not valid" in bad_key.value.message


def test_azure_openai_sdk_passes_validation_and_parses_the_answer(sim):
    resp = azure(sim).chat.completions.create(
        model="dep", messages=[{"role": "system", "content": "Be terse."}, {"role": "user", "content": "hello"}],
        max_tokens=5, temperature=0.2, stop=["END"],
    )  # fmt: skip
    assert resp.model == "gpt-4o-sim" and resp.choices[0].finish_reason == "length"
    assert resp.usage.completion_tokens == 5 and resp.choices[0].message.content.startswith("[az]")
    filtered = azure(sim).chat.completions.create(
        model="dep", messages=[{"role": "user", "content": "[[sim:output_filter]]"}], max_tokens=5
    )
    assert filtered.choices[0].finish_reason == "content_filter"
    assert sim.shape_rejections()["az"] == 0


def test_azure_openai_sdk_maps_content_filter_rate_limit_and_deployment_errors(sim):
    client = azure(sim)
    msgs = [{"role": "user", "content": "hi"}]
    with pytest.raises(openai.BadRequestError) as filtered:
        client.chat.completions.create(
            model="dep", messages=[{"role": "user", "content": "[[sim:input_filter]]"}]
        )
    assert filtered.value.code == "content_filter"
    with pytest.raises(openai.NotFoundError) as missing:
        client.chat.completions.create(model="nope", messages=msgs)
    assert missing.value.code == "DeploymentNotFound"
    old_version, wrong_key = azure(sim, api_version="1999-01-01"), azure(sim, key="wrong")
    with pytest.raises(openai.NotFoundError):  # an api-version the resource does not serve
        old_version.chat.completions.create(model="dep", messages=msgs)
    with pytest.raises(openai.AuthenticationError):
        wrong_key.chat.completions.create(model="dep", messages=msgs)
    with pytest.raises(openai.BadRequestError, match="Unrecognized request argument supplied: top_k"):
        client.chat.completions.create(model="dep", messages=msgs, extra_body={"top_k": 3})
    with pytest.raises(openai.RateLimitError) as limited:  # rpm 60 over 10 s windows: a bucket of 10 requests
        for _ in range(15):
            client.chat.completions.create(model="dep", messages=msgs, max_tokens=2)
    headers = limited.value.response.headers
    assert int(headers["retry-after-ms"]) > 0 and int(headers["retry-after"]) >= 1


# ---- streams -----------------------------------------------------------------------------------------------
HELLO = [{"role": "user", "content": "hello world, how are you"}]


def test_openai_sdk_parses_the_stream_and_its_usage_chunk(sim):
    chunks = list(gpt(sim).chat.completions.create(model="gpt-sim", messages=HELLO, max_tokens=6, stream=True,
                                                   stream_options={"include_usage": True}))  # fmt: skip
    assert all(isinstance(ch, openai.types.chat.ChatCompletionChunk) for ch in chunks)
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    assert text == "[gpt] tok tok tok "  # completion_tokens 3 < max_tokens
    assert [ch.choices[0].finish_reason for ch in chunks if ch.choices][-1] == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert (chunks[-1].usage.prompt_tokens, chunks[-1].usage.completion_tokens) == (6, 3)
    assert all(ch.usage is None for ch in chunks[:-1])
    # the SDK's stream helper accumulates the chunks into a completion
    with gpt(sim).chat.completions.stream(model="gpt-sim", messages=HELLO, max_tokens=8,
                                          stream_options={"include_usage": True}) as stream:  # fmt: skip
        final = stream.get_final_completion()
    assert final.choices[0].message.content == "[gpt] tok tok tok " and final.usage.total_tokens == 9
    assert sim.shape_rejections()["gpt"] == 0


def test_openai_sdk_raises_on_the_in_stream_error_and_on_a_cut(sim):
    failing = [{"role": "user", "content": "[[sim:stream_error_after=1]] hi"}]
    stream = gpt(sim).chat.completions.create(model="gpt-sim", messages=failing, max_tokens=4, stream=True)
    with pytest.raises(openai.APIError) as err:
        list(stream)
    assert err.value.type == "server_error" and "had an error" in err.value.message
    with pytest.raises(openai.APIConnectionError):  # the connection closed with the body unfinished
        list(gpt(sim).chat.completions.create(model="gpt-sim", max_tokens=4, stream=True, messages=[
            {"role": "user", "content": "[[sim:stream_cut_after=1]] hi"}]))  # fmt: skip
    with pytest.raises(openai.BadRequestError) as bad:  # stream_options without stream
        gpt(sim).chat.completions.create(
            model="gpt-sim", messages=HELLO, stream_options={"include_usage": True}
        )
    assert bad.value.param == "stream_options"
    c = sim.provider_counters("gpt")
    assert (c["streams_errored"], c["streams_cut"], c["in_flight"]) == (1, 1, 0)


def test_azure_openai_sdk_parses_the_stream_with_its_prompt_filter_chunk(sim):
    chunks = list(azure(sim, name="az_stream").chat.completions.create(
        model="dep", messages=HELLO, max_tokens=5, stream=True, stream_options={"include_usage": True}))  # fmt: skip
    assert chunks[0].choices == [] and chunks[0].model_extra["prompt_filter_results"][0]["prompt_index"] == 0
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    assert text == "[az_stream] " + "tok " * 5 and chunks[-1].usage.completion_tokens == 5
    assert chunks[-2].choices[0].finish_reason == "length" and chunks[-2].model == "gpt-4o-sim"
    assert sim.shape_rejections()["az_stream"] == 0


def test_anthropic_sdk_streams_a_message_and_raises_the_error_event(sim):
    client = claude(sim)
    with client.messages.stream(
        model="claude-sim", max_tokens=16, system="Be terse.", messages=HELLO
    ) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert (
        isinstance(final, anthropic.types.Message)
        and final.content[0].text == text == "[claude] " + "tok " * 16
    )
    assert final.stop_reason == "max_tokens" and final.usage.output_tokens == 16
    u = final.usage  # 33 characters -> 9 tokens, half read from the cache, a quarter written
    assert (u.input_tokens, u.cache_read_input_tokens, u.cache_creation_input_tokens) == (3, 4, 2)
    raw = client.messages.create(model="claude-sim", max_tokens=4, messages=HELLO, stream=True)
    kinds = [event.type for event in raw]  # ping is the SDK's to skip
    assert kinds == ["message_start", "content_block_start"] + ["content_block_delta"] * 4 + [
        "content_block_stop", "message_delta", "message_stop"]  # fmt: skip
    failing = [{"role": "user", "content": "[[sim:stream_error_after=2]] hi"}]
    with pytest.raises(anthropic.APIStatusError) as err:
        with client.messages.stream(model="claude-sim", max_tokens=4, messages=failing) as stream:
            stream.until_done()
    assert err.value.body["error"]["type"] == "overloaded_error"
    assert sim.shape_rejections()["claude"] == 0


def test_genai_sdk_streams_the_answer_and_raises_the_error_object(sim):
    client = gemini(sim)  # held: a client collected mid-call closes its connection pool
    config = genai_types.GenerateContentConfig(max_output_tokens=6, system_instruction="Be terse.")
    chunks = list(client.models.generate_content_stream(model="gemini-sim", contents="hello world, how are you",
                                                        config=config))  # fmt: skip
    assert len(chunks) == 4 and "".join(ch.text for ch in chunks) == "[gem] " + "tok " * 6
    assert chunks[-1].candidates[0].finish_reason == genai_types.FinishReason.MAX_TOKENS
    usage = chunks[-1].usage_metadata  # 33 characters -> 9 tokens, half of them cached
    assert (usage.prompt_token_count, usage.candidates_token_count, usage.cached_content_token_count) == (
        9,
        6,
        4,
    )
    with pytest.raises(genai_errors.ServerError) as err:
        list(
            client.models.generate_content_stream(
                model="gemini-sim", contents="[[sim:stream_error_after=1]] hi"
            )
        )
    assert err.value.code == 503 and err.value.status == "UNAVAILABLE"
    assert sim.shape_rejections()["gem"] == 0
