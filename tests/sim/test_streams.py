"""Streamed answers over real HTTP, every kind: the events in the real APIs' order and framing, the text of
the plain answer split in chunks, stream validation (refusals counted in shape_rejections), the shaping
knobs and triggers, mid-stream errors and cuts, a client going away mid-stream (counted, in_flight back to
0), and the pipeline's quotas / faults answering as plain HTTP errors before any stream byte."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from sim.config import ConfigError, load_config
from sim.streaming import split_text, stream_shape
from tests.sim.helpers import ANTHROPIC_HEADERS, HTTP, azure_body, claude_body, gemini_body
from tests.waiting import wait_until

KINDS = ["openai", "azure_openai", "anthropic", "gemini", "gemini_json"]
PROVIDER = {
    "openai": "gpt",
    "azure_openai": "az",
    "anthropic": "claude",
    "gemini": "gem",
    "gemini_json": "gem",
}
COMMON = {"median_ms": 0, "completion_tokens": 5}
CONFIG = {
    "providers": {
        "gpt": {"model": "gpt-sim", **COMMON},
        "az": {"kind": "azure_openai", "model": "gpt-4o-sim", **COMMON},
        "claude": {"kind": "anthropic", "model": "claude-sim", **COMMON},
        "gem": {"kind": "gemini", "model": "gemini-sim", **COMMON},
    }
}


def config(**extra) -> dict:
    """CONFIG with ``extra`` options on every provider."""
    return {"providers": {name: {**p, **extra} for name, p in CONFIG["providers"].items()}}


def request(
    sim, kind: str, text: str = "hello world!", *, streamed: bool = True, **extra
) -> tuple[str, dict]:
    """(url, httpx keyword arguments) of a request of ``kind`` (streamed unless ``streamed`` is False; the
    body's own ``stream`` then comes from ``extra``)."""
    if kind == "openai":
        body = {"model": "m", "messages": [{"role": "user", "content": text}], "max_tokens": 8, **extra}
        return f"{sim.base_url}/gpt/v1/chat/completions", {
            "json": {**body, "stream": True} if streamed else body
        }
    if kind == "azure_openai":
        body = azure_body(text, 8, **extra)
        url = f"{sim.base_url}/az/openai/deployments/gpt-4o-sim/chat/completions"
        return url, {
            "json": {**body, "stream": True} if streamed else body,
            "params": {"api-version": "2024-10-21"},
        }
    if kind == "anthropic":
        body = claude_body(text, 8, **extra)
        return f"{sim.base_url}/claude/v1/messages", {"json": {**body, "stream": True} if streamed else body,
                                                      "headers": ANTHROPIC_HEADERS}  # fmt: skip
    body = gemini_body(text, generationConfig={"maxOutputTokens": 8}, **extra)
    method = "streamGenerateContent" if streamed else "generateContent"
    params = {"alt": "sse"} if kind == "gemini" and streamed else {}
    return f"{sim.base_url}/gem/v1beta/models/gemini-sim:{method}", {"json": body, "params": params}


def post(sim, kind: str, text: str = "hello world!", **kw) -> httpx.Response:
    url, args = request(sim, kind, text, **kw)
    return HTTP.post(url, **args)


def events(kind: str, body: str) -> list[tuple[str | None, object]]:
    """The body's events as (SSE event name, data: parsed JSON, or the raw string such as "[DONE]"); every
    event must be whole (ended by its blank line)."""
    if kind == "gemini_json":
        return [(None, item) for item in json.loads(body)]
    sep = "\r\n\r\n" if kind == "gemini" else "\n\n"
    blocks = body.split(sep)
    assert blocks[-1] == "", f"the body does not end with a whole event: {body[-80:]!r}"
    out: list[tuple[str | None, object]] = []
    for block in blocks[:-1]:
        lines = block.split(sep[: len(sep) // 2])
        name = lines[0][len("event: ") :] if lines[0].startswith("event: ") else None
        data = [line[len("data: ") :] for line in lines if line.startswith("data: ")]
        assert len(data) == 1 and len(lines) == (2 if name else 1), block
        out.append((name, data[0] if data[0] == "[DONE]" else json.loads(data[0])))
    return out


def content(kind: str, evs) -> list[str]:
    """The text pieces of the content events."""
    if kind in ("openai", "azure_openai"):
        return [d["choices"][0]["delta"]["content"] for _, d in evs
                if isinstance(d, dict) and d.get("choices") and "role" not in d["choices"][0]["delta"]
                and "content" in d["choices"][0]["delta"]]  # fmt: skip
    if kind == "anthropic":
        return [d["delta"]["text"] for name, d in evs if name == "content_block_delta"]
    return [d["candidates"][0]["content"]["parts"][0]["text"] for _, d in evs if "candidates" in d]


def plain_text(kind: str, answer: dict) -> str:
    if kind in ("openai", "azure_openai"):
        return answer["choices"][0]["message"]["content"]
    if kind == "anthropic":
        return answer["content"][0]["text"]
    return answer["candidates"][0]["content"]["parts"][0]["text"]


def first_content(r: httpx.Response, kind: str):
    """Read ``r`` until its first content event is whole; returns the raw iterator (keep it: an iterator
    closed or collected half read closes the connection) and the bytes read."""
    parts, seen = r.iter_raw(), b""
    sep = "\r\n\r\n" if kind == "gemini" else "\n\n"
    while True:
        seen += next(parts)
        if kind == "gemini_json":
            if b'"candidates"' in seen:
                return parts, seen
            continue
        text = seen.decode()
        if sep in text and content(kind, events(kind, text[: text.rfind(sep) + len(sep)])):
            return parts, seen


def read_until_cut(sim, kind: str, text: str) -> bytes:
    """The bytes of a stream whose connection is closed before its end (httpx: incomplete chunked read)."""
    url, args = request(sim, kind, text)
    got = b""
    with pytest.raises(httpx.RemoteProtocolError), HTTP.stream("POST", url, **args) as r:
        assert r.status_code == 200
        for part in r.iter_raw():
            got += part
    return got


# ---- shapes ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_streams_the_plain_answers_text_in_chunks_and_counts_it(sim_server, kind):
    sim = sim_server(CONFIG)
    plain = post(sim, kind, streamed=False)
    r = post(sim, kind)
    assert r.status_code == 200
    want = "application/json" if kind == "gemini_json" else "text/event-stream"
    assert r.headers["content-type"].startswith(want)
    pieces = content(kind, events(kind, r.text))
    assert len(pieces) == 4 and all(pieces)  # the default stream_chunks
    assert "".join(pieces) == plain_text(kind, plain.json())
    c = sim.provider_counters(PROVIDER[kind])
    assert (c["streams_started"], c["streams_completed"], c["ok"], c["in_flight"]) == (1, 1, 2, 0)
    assert c["streams_errored"] == c["streams_cut"] == c["streams_aborted_by_client"] == 0
    assert c["billed_tokens"] == c["delivered_tokens"] > 0 and c["shape_rejections"] == 0
    assert sim.counters()["totals"]["streams_completed"] == 1


def test_openai_stream_chunks_usage_only_with_include_usage_then_done(sim_server):
    sim = sim_server(CONFIG)
    for include in (False, True):
        extra = {"stream_options": {"include_usage": True}} if include else {}
        evs = events("openai", post(sim, "openai", "hello world!", **extra).text)
        assert all(name is None for name, _ in evs) and evs[-1] == (None, "[DONE]")
        chunks = [d for _, d in evs[:-1]]
        assert {d["object"] for d in chunks} == {"chat.completion.chunk"} and len(
            {d["id"] for d in chunks}
        ) == 1
        assert chunks[0]["choices"] == [{"index": 0, "delta": {"role": "assistant", "content": "", "refusal": None},
                                         "logprobs": None, "finish_reason": None}]  # fmt: skip
        assert [d["choices"][0]["finish_reason"] for d in chunks[1:5]] == [None] * 4
        assert chunks[5]["choices"] == [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": "stop"}]
        if include:  # a last chunk with empty choices and the usage; every other chunk "usage": null
            assert len(chunks) == 7 and chunks[6]["choices"] == []
            assert chunks[6]["usage"] == {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8}
            assert [d["usage"] for d in chunks[:6]] == [None] * 6
        else:
            assert len(chunks) == 6 and not any("usage" in d for d in chunks)
    # max_tokens reached: finish_reason length
    long = events("openai", post(sim, "openai", max_tokens=5, stream_options={"include_usage": True}).text)
    assert long[-3][1]["choices"][0]["finish_reason"] == "length"


def test_azure_stream_starts_with_the_prompt_filter_chunk_and_filters_each_choice(sim_server):
    sim = sim_server(CONFIG)
    evs = events("azure_openai", post(sim, "azure_openai", stream_options={"include_usage": True}).text)
    first = evs[0][1]
    assert first["choices"] == [] and first["prompt_filter_results"][0]["prompt_index"] == 0
    assert first["prompt_filter_results"][0]["content_filter_results"]["violence"]["filtered"] is False
    assert evs[1][1]["choices"][0]["delta"]["role"] == "assistant" and evs[1][1]["model"] == "gpt-4o-sim"
    assert all("content_filter_results" in d["choices"][0] for _, d in evs[1:-2])
    assert evs[-2][1]["choices"] == [] and evs[-2][1]["usage"]["completion_tokens"] == 5
    assert evs[-1] == (None, "[DONE]")
    filtered = events("azure_openai", post(sim, "azure_openai", "[[sim:output_filter]] hi").text)
    assert content("azure_openai", filtered) == []
    finish = filtered[-2][1]["choices"][0]
    assert (
        finish["finish_reason"] == "content_filter"
        and finish["content_filter_results"]["violence"]["filtered"]
    )
    assert sim.provider_counters("az")["by_form"] == {"output_filter": 1}


def test_anthropic_stream_events_in_the_references_order(sim_server):
    sim = sim_server({"providers": {"claude": {**CONFIG["providers"]["claude"], "cache_read_ratio": 0.5}}})
    evs = events("anthropic", post(sim, "anthropic", "hello world, how are you?").text)
    assert [name for name, _ in evs] == ["message_start", "content_block_start", "ping"] + [
        "content_block_delta"] * 4 + ["content_block_stop", "message_delta", "message_stop"]  # fmt: skip
    assert all(d["type"] == name for name, d in evs)
    message = evs[0][1]["message"]
    assert message["content"] == [] and message["stop_reason"] is None and message["role"] == "assistant"
    assert message["usage"] == {"input_tokens": 4, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 3,
                                "output_tokens": 1}  # fmt: skip
    assert evs[1][1] == {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "text", "text": ""},
    }
    assert {d["delta"]["type"] for _, d in evs[3:7]} == {"text_delta"}
    assert evs[8][1] == {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                         "usage": {"output_tokens": 5}}  # fmt: skip
    refusal = events("anthropic", post(sim, "anthropic", "[[sim:refusal]] hi").text)
    assert [name for name, _ in refusal] == ["message_start", "ping", "message_delta", "message_stop"]
    assert refusal[2][1]["delta"]["stop_reason"] == "refusal"


@pytest.mark.parametrize("kind", ["gemini", "gemini_json"])
def test_gemini_stream_responses_grow_the_usage_and_the_last_finishes(sim_server, kind):
    sim = sim_server(CONFIG)
    r = post(sim, kind, "hello world!")
    if kind == "gemini":
        assert r.text.startswith("data: {") and r.text.endswith("}\r\n\r\n")
    else:
        assert r.text.startswith("[{") and r.text.endswith("}]")
    responses = [d for _, d in events(kind, r.text)]
    assert len(responses) == 4 and len({d["responseId"] for d in responses}) == 1
    assert ["finishReason" in d["candidates"][0] for d in responses] == [False, False, False, True]
    assert responses[-1]["candidates"][0]["finishReason"] == "STOP"
    counts = [d["usageMetadata"].get("candidatesTokenCount", 0) for d in responses]
    assert counts == sorted(counts) and counts[-1] == 5
    assert responses[-1]["usageMetadata"]["totalTokenCount"] == 3 + 5
    assert {d["usageMetadata"]["promptTokenCount"] for d in responses} == {3}
    url = f"{sim.base_url}/gem/v1/models/gemini-sim:streamGenerateContent"  # the v1 route too
    assert HTTP.post(url, json=gemini_body(), params={"alt": "sse"}).status_code == 200
    blocked = [d for _, d in events(kind, post(sim, kind, "[[sim:blocked]] hi").text)]
    assert len(blocked) == 1 and blocked[0]["promptFeedback"]["blockReason"] == "SAFETY"


# ---- validation ------------------------------------------------------------------------------------------
OPENAI_STREAM_BAD = [
    ({"stream": "true"}, "Invalid type for 'stream': expected a boolean, but got a string instead.", "stream",
     "invalid_type"),
    ({"stream_options": {"include_usage": True}}, "The 'stream_options' parameter is only allowed when 'stream' "
     "is enabled.", "stream_options", None),
    ({"stream": False, "stream_options": {"include_usage": True}}, "The 'stream_options' parameter is only "
     "allowed when 'stream' is enabled.", "stream_options", None),
    ({"stream": True, "stream_options": "usage"}, "Invalid type for 'stream_options': expected an object, but "
     "got a string instead.", "stream_options", "invalid_type"),
    ({"stream": True, "stream_options": {"include_usage": 1}}, "Invalid type for 'stream_options.include_usage': "
     "expected a boolean, but got an integer instead.", "stream_options.include_usage", "invalid_type"),
    ({"stream": True, "stream_options": {"usage": True}}, "Unknown parameter: 'stream_options.usage'.",
     "stream_options.usage", "unknown_parameter"),
]  # fmt: skip


@pytest.mark.parametrize("kind", ["openai", "azure_openai"])
def test_openai_kinds_refuse_bad_stream_params_as_the_api_does(sim_server, kind):
    sim = sim_server(CONFIG)
    for extra, message, param, code in OPENAI_STREAM_BAD:
        r = post(sim, kind, streamed=False, **extra)
        assert r.status_code == 400, extra
        assert r.json()["error"] == {"message": message, "type": "invalid_request_error", "param": param,
                                     "code": code}  # fmt: skip
    assert sim.shape_rejections()[PROVIDER[kind]] == len(OPENAI_STREAM_BAD)
    # accepted: stream false / null is a plain answer; stream_options null or empty with stream
    assert post(sim, kind, streamed=False, stream=False).json()["object"] == "chat.completion"
    assert post(sim, kind, streamed=False, stream=None).json()["object"] == "chat.completion"
    for options in (None, {}, {"include_usage": False}):
        assert post(sim, kind, stream_options=options).text.endswith("data: [DONE]\n\n")
    assert sim.shape_rejections()[PROVIDER[kind]] == len(OPENAI_STREAM_BAD)


def test_anthropic_and_gemini_validate_streams_like_their_plain_calls(sim_server):
    sim = sim_server(CONFIG)
    bad = post(sim, "anthropic", streamed=False, stream="yes")
    assert (
        bad.status_code == 400 and bad.json()["error"]["message"] == "stream: Input should be a valid boolean"
    )
    assert post(sim, "anthropic", streamed=False, stream=False).json()["type"] == "message"
    assert sim.shape_rejections()["claude"] == 1
    url, args = request(sim, "gemini")
    for body in (
        {"contents": []},
        {**gemini_body(), "stream": True},
        gemini_body(generationConfig={"topK": 0}),
    ):
        stream = HTTP.post(url, json=body, params={"alt": "sse"})
        plain = HTTP.post(url.replace(":streamGenerateContent", ":generateContent"), json=body)
        assert stream.status_code == plain.status_code == 400 and stream.json() == plain.json()
    proto = HTTP.post(url, json=gemini_body(), params={"alt": "proto"})
    assert proto.status_code == 400 and "alt" in proto.json()["error"]["message"]
    other = HTTP.post(url.replace("gemini-sim", "gemini-pro"), json=gemini_body(), params={"alt": "sse"})
    assert (
        other.status_code == 404 and "supported for streamGenerateContent" in other.json()["error"]["message"]
    )
    assert sim.shape_rejections()["gem"] == 3 * 2 + 2


# ---- shaping: config, triggers -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"stream_chunks": 0}, "providers.p.stream_chunks: must be >= 1"),
        ({"stream_chunks": 2.5}, "providers.p.stream_chunks: expected an integer"),
        ({"chunk_delay_ms": -1}, "providers.p.chunk_delay_ms: must be >= 0"),
        ({"stream_error_after": -1}, "providers.p.stream_error_after: must be >= 0"),
        ({"stream_cut_after": "1"}, "providers.p.stream_cut_after: expected a number"),
        (
            {"stream_error_after": 1, "stream_cut_after": 1},
            "providers.p.stream_cut_after: give stream_error_after",
        ),
    ],
)
def test_stream_config_errors_name_the_field(raw, message):
    with pytest.raises(ConfigError) as err:
        load_config({"providers": {"p": raw}})
    assert str(err.value).startswith(message), str(err.value)


def test_stream_shape_triggers_override_the_config_and_bad_values_are_refused():
    cfg = load_config({"time_scale": 10, "providers": {"p": {"stream_chunks": 3, "chunk_delay_ms": 100,
                                                             "stream_cut_after": 2}}}).providers["p"]  # fmt: skip
    shape = stream_shape(cfg, "hi", 10)
    assert (shape.chunks, shape.delay_s, shape.error_after, shape.cut_after) == (3, 0.01, None, 2)
    shape = stream_shape(
        cfg, "[[sim:stream_chunks=20]] [[sim:chunk_delay_ms=50]] [[sim:stream_error_after=0]]", 10
    )
    assert (shape.chunks, shape.delay_s, shape.error_after, shape.cut_after) == (20, 0.005, 0, None)
    for text, problem in [
        ("[[sim:stream_chunks=0]]", "[[sim:stream_chunks=0]]: stream_chunks must be >= 1"),
        ("[[sim:stream_chunks=x]]", "[[sim:stream_chunks=x]]: stream_chunks must be an integer"),
        ("[[sim:chunk_delay_ms=-5]]", "[[sim:chunk_delay_ms=-5]]: chunk_delay_ms must be >= 0"),
        ("[[sim:chunk_delay_ms=nan]]", "[[sim:chunk_delay_ms=nan]]: chunk_delay_ms must be >= 0"),
        ("[[sim:stream_error_after=1]][[sim:stream_cut_after=1]]", "[[sim:stream_error_after=N]] and"),
    ]:
        assert str(stream_shape(cfg, text, 10)).startswith(problem), text
    assert split_text("abcdefghij", 4) == ["abc", "def", "gh", "ij"] and split_text("ab", 5) == ["a", "b"]
    assert split_text("", 3) == []


def test_stream_triggers_in_the_last_message_shape_one_stream(sim_server):
    sim = sim_server(config(completion_tokens=10))
    assert (
        len(content("openai", events("openai", post(sim, "openai", "[[sim:stream_chunks=20]]").text))) == 20
    )
    messages = [{"role": "user", "content": "[[sim:stream_chunks=20]]"}, {"role": "assistant", "content": "ok"},
                {"role": "user", "content": "again"}]  # fmt: skip
    url, args = request(sim, "openai")
    earlier = HTTP.post(url, json={**args["json"], "messages": messages})
    assert len(content("openai", events("openai", earlier.text))) == 4  # only the last message's triggers
    assert (
        post(sim, "openai", "[[sim:stream_error_after=1]]", streamed=False).json()["object"]
        == "chat.completion"
    )
    started = time.monotonic()
    slow = post(sim, "anthropic", "[[sim:stream_chunks=3]] [[sim:chunk_delay_ms=100]]")
    assert time.monotonic() - started >= 0.19  # two gaps of 100 ms between the three content events
    assert len(content("anthropic", events("anthropic", slow.text))) == 3
    bad = post(sim, "gemini", "[[sim:stream_chunks=0]]")
    assert bad.status_code == 400 and bad.json()["error"] == {
        "message": "[[sim:stream_chunks=0]]: stream_chunks must be >= 1", "type": "sim"}  # fmt: skip
    c = sim.provider_counters("gem")
    assert c["shape_rejections"] == 0 and c["streams_started"] == 0 and c["billed_tokens"] == 0


# ---- mid-stream faults -------------------------------------------------------------------------------------
ERROR_EVENTS = {
    "openai": (None, {"error": {"message": "The server had an error while processing your request. Sorry about "
                                "that!", "type": "server_error", "param": None, "code": None}}),
    "anthropic": ("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    "gemini": (None, {"error": {"code": 503, "message": "The model is overloaded. Please try again later.",
                                "status": "UNAVAILABLE"}}),
}  # fmt: skip


def error_event(kind: str):
    return ERROR_EVENTS[{"azure_openai": "openai", "gemini_json": "gemini"}.get(kind, kind)]


@pytest.mark.parametrize("kind", KINDS)
def test_stream_error_after_n_chunks_sends_the_kinds_error_event_and_ends(sim_server, kind):
    sim = sim_server(CONFIG)
    r = post(sim, kind, "[[sim:stream_error_after=2]] hi")
    assert r.status_code == 200
    evs = events(kind, r.text)  # whole events (a JSON array closed after the error object)
    assert len(content(kind, evs)) == 2
    assert evs[-1] == error_event(kind)
    assert (None, "[DONE]") not in evs and "message_stop" not in [name for name, _ in evs]
    assert not any(
        "finishReason" in d["candidates"][0] for _, d in evs if isinstance(d, dict) and "candidates" in d
    )
    c = sim.provider_counters(PROVIDER[kind])
    assert (c["streams_started"], c["streams_errored"], c["streams_completed"], c["in_flight"]) == (
        1,
        1,
        0,
        0,
    )
    assert c["billed_tokens"] > 0 and c["delivered_tokens"] == 0
    # the config's stream_error_after: every stream; 0 = right after the head
    sim.set_config(config(stream_error_after=0))
    evs = events(kind, post(sim, kind).text)
    assert content(kind, evs) == [] and evs[-1] == error_event(kind)


@pytest.mark.parametrize("kind", KINDS)
def test_stream_cut_after_n_chunks_closes_the_connection_with_no_end(sim_server, kind):
    sim = sim_server(CONFIG)
    got = read_until_cut(sim, kind, "[[sim:stream_cut_after=1]] hi").decode()
    if kind == "gemini_json":
        assert got.startswith("[{") and not got.endswith("]")
        pieces = [json.loads(got[1:])["candidates"][0]["content"]["parts"][0]["text"]]
    else:
        pieces = content(kind, events(kind, got))
    assert len(pieces) == 1
    c = sim.provider_counters(PROVIDER[kind])
    assert (c["streams_started"], c["streams_cut"], c["streams_completed"], c["in_flight"]) == (1, 1, 0, 0)
    assert c["billed_tokens"] > 0 and c["delivered_tokens"] == 0
    assert post(sim, kind).status_code == 200  # the next stream is whole
    assert sim.provider_counters(PROVIDER[kind])["streams_completed"] == 1


@pytest.mark.parametrize("kind", KINDS)
def test_a_client_leaving_mid_stream_is_counted_and_frees_its_slot(sim_server, kind):
    # 30 s between chunks: the handler is asleep when the client goes (aiohttp cancels it)
    sim = sim_server(config(chunk_delay_ms=30_000, max_concurrency=1))
    url, args = request(sim, kind)
    name = PROVIDER[kind]
    with HTTP.stream("POST", url, **args) as r:
        assert r.status_code == 200
        parts, _ = first_content(r, kind)  # (leaving the iterator with break would close the connection)
        busy = post(sim, kind)  # the stream holds the only slot
        assert busy.status_code in (503, 529) and not busy.headers["content-type"].startswith(
            "text/event-stream"
        )
        c = sim.provider_counters(name)
        assert (c["in_flight"], c["streams_started"], c["streams_aborted_by_client"]) == (1, 1, 0)
    # the response closed half read: httpx closes the connection while the handler sleeps between chunks

    def aborted() -> dict | None:
        c = sim.provider_counters(name)
        return c if c["streams_aborted_by_client"] else None

    c = wait_until(aborted, 30, what="the simulator to see the client leave the stream")
    assert (c["streams_started"], c["streams_aborted_by_client"], c["in_flight"]) == (1, 1, 0)
    assert c["disconnects"] == 1 and c["streams_completed"] == 0 and c["max_in_flight"] == 1
    assert c["billed_tokens"] > 0 and c["delivered_tokens"] == 0
    sim.set_config(config(max_concurrency=1))
    assert post(sim, kind).status_code == 200


# ---- the pipeline before the stream -----------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["openai", "azure_openai", "anthropic", "gemini"])
def test_quotas_and_faults_answer_plain_errors_before_any_stream_byte(sim_server, kind):
    sim = sim_server(config(rpm=6, error_script=["overloaded", "ok", "server_error"]))
    name = PROVIDER[kind]
    url, args = request(sim, kind)

    def with_headers(**headers) -> dict:
        return {**args, "headers": {**args.get("headers", {}), **headers}}

    first = HTTP.post(url, **with_headers(**{"X-Request-ID": "r1"}))
    assert first.status_code in (503, 529) and first.headers["content-type"].startswith("application/json")
    assert post(sim, kind).headers["content-type"].startswith("text/event-stream")  # the script's "ok"
    failed = post(sim, kind)  # the named server_error form
    assert failed.status_code == 500 and "error" in failed.json()
    limited = HTTP.post(url, **with_headers(**{"X-Request-ID": "r1"}))
    assert limited.status_code == 429 and limited.headers["content-type"].startswith("application/json")
    assert sim.request_counts()[name] == {"r1": 2, "": 2}
    c = sim.provider_counters(name)
    assert (c["streams_started"], c["streams_completed"], c["rate_limited_429"]) == (1, 1, 1)
    sim.set_config(config(error_rate_500=1.0))
    after_processing = post(sim, kind)
    assert after_processing.status_code == 500 and after_processing.headers["content-type"].startswith(
        "application/json")  # fmt: skip
    c = sim.provider_counters(name)
    assert c["errors_500"] == 1 and c["streams_started"] == 0 and c["billed_tokens"] > 0
    forced = HTTP.post(url, **with_headers(**{"x-sim-force-status": "429"}))
    assert forced.status_code == 429 and forced.headers["content-type"].startswith("application/json")


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_without_handler_cancellation_the_next_event_sees_the_client_gone(sim_server, kind):
    # aiohttp does not cancel the handler here: the stream finds the transport closed at its next event
    sim = sim_server(
        config(chunk_delay_ms=300, completion_tokens=40, stream_chunks=20), handler_cancellation=False
    )
    url, args = request(sim, kind)
    name = PROVIDER[kind]
    with HTTP.stream("POST", url, **args) as r:
        parts, _ = first_content(r, kind)

    def aborted() -> dict | None:
        c = sim.provider_counters(name)
        return c if c["streams_aborted_by_client"] else None

    c = wait_until(aborted, 30, what="the next event to find the client gone")
    assert (c["streams_started"], c["streams_completed"], c["in_flight"], c["disconnects"]) == (1, 0, 0, 1)
