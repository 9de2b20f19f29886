"""OpenAI chat completions (``POST /{name}/v1/chat/completions``) and Azure OpenAI's deployment route
(``POST /{name}/openai/deployments/{deployment}/chat/completions?api-version=...``, ``api-key`` header).

The OpenAI route keeps the simulator's long-standing light validation (tests across the project send it
arbitrary params). The Azure route validates the body as the API does — unknown arguments, roles, ranges
(https://learn.microsoft.com/azure/ai-services/openai/reference#chat-completions) — and answers Azure's own
forms, as seen verbatim in public reports: no / unknown api-version -> 404 ``{"error": {"code": "404",
"message": "Resource not found"}}``; an unknown deployment -> 404 ``DeploymentNotFound``; a bad key -> 401;
429 ``Requests to the ChatCompletions_Create Operation under Azure OpenAI API version ... have exceeded
token rate limit ... Please retry after N seconds`` with ``retry-after-ms`` and ``retry-after``; the input
content filter -> 400 ``code: content_filter`` with ``innererror.code: ResponsibleAIPolicyViolation``.
"""

from __future__ import annotations

import math
import time
import uuid

from sim.streaming import SSE, Event, StreamPlan, split_text
from sim.wire_common import Call, Reply, Usage, is_int, is_number, type_name

CHAT_KEYS = {"messages", "model", "frequency_penalty", "logit_bias", "logprobs", "top_logprobs", "max_tokens",
             "max_completion_tokens", "n", "presence_penalty", "response_format", "seed", "stop", "stream",
             "stream_options", "temperature", "top_p", "tools", "tool_choice", "parallel_tool_calls", "user",
             "function_call", "functions", "data_sources", "reasoning_effort", "store", "metadata",
             "modalities", "prediction", "audio", "user_security_context"}  # fmt: skip
ROLES = ("system", "assistant", "user", "function", "tool", "developer")
FILTER_OK = {"hate": {"filtered": False, "severity": "safe"}, "self_harm": {"filtered": False, "severity": "safe"},
             "sexual": {"filtered": False, "severity": "safe"},
             "violence": {"filtered": False, "severity": "safe"}}  # fmt: skip
FILTER_HIT = {**FILTER_OK, "violence": {"filtered": True, "severity": "medium"}}


def error_body(message: str, type_: str | None, code: str | None = None, param: str | None = None) -> dict:
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


def invalid(message: str, param: str | None = None, code: str | None = None) -> Reply:
    reply = Reply(400, error_body(message, "invalid_request_error", code, param))
    reply.rejected = "shape"
    return reply


def validate_openai(body) -> str | None:
    """The OpenAI route's light check (unchanged since the simulator's first version)."""
    if not isinstance(body, dict):
        return "Request body must be a JSON object."
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "'messages' must be a non-empty list."
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str) or "content" not in m:
            return f"messages[{i}]: expected an object with 'role' and 'content'."
    for key in ("max_tokens", "max_completion_tokens"):
        v = body.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            return f"'{key}' must be a positive integer."
    return None


def _range(body: dict, key: str, low, high, *, integer: bool = False) -> Reply | None:
    if key not in body or body[key] is None:
        return None
    value = body[key]
    kind = "integer" if integer else "decimal"
    if not (is_int(value) if integer else is_number(value)):
        return invalid(f"Invalid type for '{key}': expected {'an integer' if integer else 'a decimal'}, "
                       f"but got {type(value).__name__} instead.", key, "invalid_type")  # fmt: skip
    if low is not None and value < low:
        return invalid(f"Invalid '{key}': {kind} below minimum value. Expected a value >= {low}, but got "
                       f"{value} instead.", key, f"{kind}_below_min_value")  # fmt: skip
    if high is not None and value > high:
        return invalid(f"Invalid '{key}': {kind} above maximum value. Expected a value <= {high}, but got "
                       f"{value} instead.", key, f"{kind}_above_max_value")  # fmt: skip
    return None


def _messages(messages) -> Reply | None:
    if messages is None:
        return invalid("Missing required parameter: 'messages'.", "messages", "missing_required_parameter")
    if not isinstance(messages, list):
        return invalid("Invalid type for 'messages': expected an array.", "messages", "invalid_type")
    if not messages:
        return invalid("Invalid 'messages': empty array. Expected an array with minimum length 1, but got an "
                       "empty array instead.", "messages", "empty_array")  # fmt: skip
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or "role" not in m:
            return invalid(f"Missing required parameter: 'messages[{i}].role'.", f"messages[{i}].role",
                           "missing_required_parameter")  # fmt: skip
        if m["role"] not in ROLES:
            return invalid(f"Invalid value: '{m['role']}'. Supported values are: 'system', 'assistant', "
                           f"'user', 'function', 'tool', and 'developer'.", f"messages[{i}].role",
                           "invalid_value")  # fmt: skip
        if "content" not in m and m["role"] != "assistant":
            return invalid(f"Missing required parameter: 'messages[{i}].content'.", f"messages[{i}].content",
                           "missing_required_parameter")  # fmt: skip
    return None


def validate_azure(body) -> Reply | None:
    """The Azure chat completions body check (the OpenAI API's own rules and wording)."""
    if not isinstance(body, dict):
        return invalid("We could not parse the JSON body of your request.")
    for key in sorted(set(body) - CHAT_KEYS):
        return invalid(f"Unrecognized request argument supplied: {key}")
    problem = (_messages(body.get("messages")) or _range(body, "temperature", 0, 2)
               or _range(body, "top_p", 0, 1) or _range(body, "max_tokens", 1, None, integer=True)
               or _range(body, "max_completion_tokens", 1, None, integer=True)
               or _range(body, "n", 1, 128, integer=True))  # fmt: skip
    if problem:
        return problem
    stop = body.get("stop")
    if stop is not None and not isinstance(stop, str):
        if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
            return invalid("Invalid type for 'stop': expected a string or an array of strings.", "stop",
                           "invalid_type")  # fmt: skip
        if len(stop) > 4:
            return invalid(f"Invalid 'stop': array too long. Expected an array with maximum length 4, but got "
                           f"an array with length {len(stop)} instead.", "stop", "array_above_max_length")  # fmt: skip
    return stream_problem(body)


STREAM_OPTIONS = ("include_usage", "include_obfuscation")


def _a(value) -> str:
    name = type_name(value)
    return ("an " if name[0] in "aeiou" else "a ") + name


def stream_problem(body: dict) -> Reply | None:
    """``stream`` a boolean; ``stream_options`` only with ``stream: true``, an object of known booleans
    (the API's own words: "The 'stream_options' parameter is only allowed when 'stream' is enabled.")."""
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        return invalid(f"Invalid type for 'stream': expected a boolean, but got {_a(stream)} instead.", "stream",
                       "invalid_type")  # fmt: skip
    options = body.get("stream_options")
    if options is None:
        return None
    if stream is not True:
        return invalid("The 'stream_options' parameter is only allowed when 'stream' is enabled.",
                       "stream_options")  # fmt: skip
    if not isinstance(options, dict):
        return invalid(f"Invalid type for 'stream_options': expected an object, but got {_a(options)} instead.",
                       "stream_options", "invalid_type")  # fmt: skip
    for key in sorted(set(options) - set(STREAM_OPTIONS)):
        return invalid(
            f"Unknown parameter: 'stream_options.{key}'.", f"stream_options.{key}", "unknown_parameter"
        )
    for key in STREAM_OPTIONS:
        value = options.get(key)
        if value is not None and not isinstance(value, bool):
            return invalid(f"Invalid type for 'stream_options.{key}': expected a boolean, but got {_a(value)} "
                           f"instead.", f"stream_options.{key}", "invalid_type")  # fmt: skip
    return None


def _texts(content) -> list[str]:
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)]
    return []


def call(body: dict, model: str, default_max_tokens: int) -> Call:
    texts = [t for m in body["messages"] for t in _texts(m.get("content"))]
    stop = body.get("stop")
    stops = [stop] if isinstance(stop, str) else list(stop or [])
    options = body.get("stream_options") or {}
    return Call(texts=texts, last_text=" ".join(_texts(body["messages"][-1].get("content"))),
                max_tokens=body.get("max_completion_tokens") or body.get("max_tokens") or default_max_tokens,
                model=body.get("model") or model, stop_sequences=stops,
                stream="sse" if body.get("stream") is True else None,
                include_usage=options.get("include_usage") is True)  # fmt: skip


def _ending(name: str, c: Call, usage: Usage, filtered: bool) -> tuple[str, str]:
    """(finish_reason, text) of an answer."""
    finish = "content_filter" if filtered else "length" if usage.completion >= c.max_tokens else "stop"
    return finish, "" if filtered else f"[{name}] " + "tok " * usage.completion


def usage_body(usage: Usage) -> dict:
    u: dict = {"prompt_tokens": usage.prompt, "completion_tokens": usage.completion,
               "total_tokens": usage.prompt + usage.completion}  # fmt: skip
    if usage.cache_read:
        u["prompt_tokens_details"] = {"cached_tokens": usage.cache_read}
    return u


def answer(name: str, c: Call, usage: Usage, *, azure: bool = False, filtered: bool = False) -> dict:
    """A ``chat.completion``; Azure adds prompt_filter_results / content_filter_results."""
    finish, text = _ending(name, c, usage, filtered)
    choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish,
              "logprobs": None}  # fmt: skip
    out = {"id": f"chatcmpl-sim-{uuid.uuid4().hex[:16]}", "object": "chat.completion",
           "created": int(time.time()), "model": c.model, "system_fingerprint": "sim", "choices": [choice],
           "usage": usage_body(usage)}  # fmt: skip
    if azure:
        choice["content_filter_results"] = FILTER_HIT if filtered else FILTER_OK
        out["prompt_filter_results"] = [{"prompt_index": 0, "content_filter_results": FILTER_OK}]
    return out


def stream_plan(name: str, c: Call, usage: Usage, chunks: int, *, azure: bool = False,
                filtered: bool = False) -> StreamPlan:  # fmt: skip
    """The answer as ``chat.completion.chunk`` events: the role chunk (``delta: {role: assistant, content:
    ""}``), one chunk per text piece, the finish chunk (``delta: {}`` and finish_reason), with
    ``include_usage`` a usage chunk (``choices: []``; every other chunk ``usage: null``), ``[DONE]``.
    Azure first sends a chunk with empty ``choices`` and ``prompt_filter_results``, and puts
    ``content_filter_results`` on every choice; its output filter sends no text, finish_reason
    ``content_filter``."""
    finish, text = _ending(name, c, usage, filtered)
    cid, created = f"chatcmpl-sim-{uuid.uuid4().hex[:16]}", int(time.time())

    def chunk(choices: list) -> dict:
        out = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": c.model,
               "system_fingerprint": "sim", "choices": choices}  # fmt: skip
        if c.include_usage:
            out["usage"] = None
        return out

    def choice(delta: dict, finish_reason: str | None = None, filters: dict | None = None) -> dict:
        ch = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        if azure:
            ch["content_filter_results"] = {} if filters is None else filters
        return ch

    head: list[Event] = []
    if azure:
        head.append((None, {"id": "", "object": "", "created": 0, "model": "", "choices": [],
                            "prompt_filter_results": [{"prompt_index": 0, "content_filter_results": FILTER_OK}]}))  # fmt: skip
    head.append((None, chunk([choice({"role": "assistant", "content": "", "refusal": None})])))
    content: list[Event] = [(None, chunk([choice({"content": piece}, filters=FILTER_OK)]))
                            for piece in split_text(text, chunks)]  # fmt: skip
    tail: list[Event] = [(None, chunk([choice({}, finish, FILTER_HIT if filtered else None)]))]
    if c.include_usage:
        tail.append((None, {**chunk([]), "usage": usage_body(usage)}))
    tail.append((None, "[DONE]"))
    return StreamPlan(SSE, head, content, tail, stream_error())


def stream_error() -> Event:
    """The in-stream error (a ``data:`` line; the stream ends after it)."""
    return (None, error_body("The server had an error while processing your request. Sorry about that!",
                             "server_error"))  # fmt: skip


# ---- Azure's own forms -----------------------------------------------------------------------------------
def azure_error(status: int, code: str, message: str) -> Reply:
    return Reply(status, {"error": {"code": code, "message": message}})


def azure_not_found() -> Reply:
    reply = azure_error(404, "404", "Resource not found")
    reply.rejected = "shape"
    return reply


def azure_deployment_not_found() -> Reply:
    reply = azure_error(404, "DeploymentNotFound", "The API deployment for this resource does not exist. If "
                        "you created the deployment within the last 5 minutes, please wait a moment and try "
                        "again.")  # fmt: skip
    reply.rejected = "shape"
    return reply


def azure_bad_key() -> Reply:
    reply = azure_error(401, "401", "Access denied due to invalid subscription key or wrong API endpoint. "
                        "Make sure to provide a valid key for an active subscription and use a correct "
                        "regional API endpoint for your resource.")  # fmt: skip
    reply.rejected = "auth"
    return reply


def azure_headers(state: dict[str, tuple[int, int, float]]) -> dict[str, str]:
    """x-ratelimit-limit-* / x-ratelimit-remaining-* (Azure sends no reset headers)."""
    h = {}
    for key in ("requests", "tokens"):
        if key in state:
            h[f"x-ratelimit-limit-{key}"] = str(state[key][0])
            h[f"x-ratelimit-remaining-{key}"] = str(state[key][1])
    return h


def azure_rate_limited(
    limit: str, wait: float, api_version: str, state, operation: str = "ChatCompletions"
) -> Reply:
    seconds = max(1, math.ceil(wait))
    what = "call rate limit" if limit == "requests" else "token rate limit"
    reply = azure_error(429, "429", f"Requests to the {operation}_Create Operation under Azure OpenAI API "
                        f"version {api_version} have exceeded {what} of your current OpenAI S0 pricing tier. "
                        f"Please retry after {seconds} seconds. Please go here: https://aka.ms/oai/quotaincrease "
                        f"if you would like to further increase the default rate limit.")  # fmt: skip
    reply.headers = {**azure_headers(state), "retry-after-ms": str(math.ceil(wait * 1000)),
                     "retry-after": str(seconds)}  # fmt: skip
    return reply


def azure_form(name: str, api_version: str) -> Reply:
    if name == "input_filter":
        body = error_body("The response was filtered due to the prompt triggering Azure OpenAI's content "
                          "management policy. Please modify your prompt and retry. To learn more about our "
                          "content filtering policies please read our documentation: "
                          "https://go.microsoft.com/fwlink/?linkid=2198766", None, "content_filter", "prompt")  # fmt: skip
        body["error"]["status"] = 400
        body["error"]["innererror"] = {
            "code": "ResponsibleAIPolicyViolation",
            "content_filter_result": FILTER_HIT,
        }
        return Reply(400, body)
    if name == "rate_limit":
        return azure_rate_limited("tokens", 1.0, api_version, {})
    if name in ("overloaded", "unavailable"):
        return azure_error(503, "ServiceUnavailable", "The service is temporarily unable to process your "
                           "request. Please try again later.")  # fmt: skip
    if name == "server_error":
        return azure_error(
            500, "InternalServerError", "The server had an error while processing your request."
        )
    raise ValueError(f"not an azure_openai error form: {name}")


# ---- OpenAI's forms ----------------------------------------------------------------------------------------
def openai_form(name: str) -> Reply:
    if name == "insufficient_quota":
        return Reply(429, error_body("You exceeded your current quota, please check your plan and billing "
                                     "details. For more information on this error, read the docs: "
                                     "https://platform.openai.com/docs/guides/error-codes/api-errors.",
                                     "insufficient_quota", "insufficient_quota"))  # fmt: skip
    if name == "overloaded":
        return Reply(
            503, error_body("The engine is currently overloaded, please try again later.", "server_error")
        )
    if name == "rate_limit":
        return Reply(429, error_body("Rate limit reached for requests.", "requests", "rate_limit_exceeded"),
                     {"Retry-After": "1"})  # fmt: skip
    if name == "server_error":
        return Reply(
            500, error_body("The server had an error while processing your request.", "server_error")
        )
    if name == "unavailable":
        return Reply(503, error_body("The server is temporarily unavailable (outage).", "server_error", "outage"),
                     {"Retry-After": "1"})  # fmt: skip
    raise ValueError(f"not an openai error form: {name}")
