"""Gemini API generateContent (``POST /{name}/v1beta/models/{model}:generateContent``), validated as the
real API does.

Shapes from the published reference (https://ai.google.dev/api/generate-content,
https://ai.google.dev/gemini-api/docs/troubleshooting for the status table) and Google's error bodies as
seen verbatim in public reports: ``{"error": {"code", "message", "status", "details"?}}``; an unknown field
is ``Invalid JSON payload received. Unknown name "x" at 'generation_config': Cannot find field.`` with a
``google.rpc.BadRequest`` fieldViolation; a 429 ``RESOURCE_EXHAUSTED`` carries ``google.rpc.QuotaFailure``
(violations with quotaMetric / quotaId / quotaDimensions) and ``google.rpc.RetryInfo.retryDelay`` ("47s");
a missing key is 403 PERMISSION_DENIED "Method doesn't allow unregistered callers ...", a wrong one 400
INVALID_ARGUMENT "API key not valid. Please pass a valid API key." with ErrorInfo API_KEY_INVALID.

Field names are accepted in lowerCamelCase and snake_case (the proto JSON mapping accepts both); paths in
messages use snake_case, as Google's do.
"""

from __future__ import annotations

import math
import re
import uuid

from sim.streaming import Event, Framing, StreamPlan, split_text
from sim.wire_common import Call, Reply, Usage, is_int, is_number

TOP = ("contents", "system_instruction", "generation_config", "safety_settings", "tools", "tool_config",
       "cached_content", "model")  # fmt: skip
CONTENT = ("role", "parts")
PART_DATA = ("text", "inline_data", "function_call", "function_response", "file_data", "executable_code",
             "code_execution_result")  # fmt: skip
PART = PART_DATA + ("thought", "thought_signature", "video_metadata")
GENERATION = ("stop_sequences", "response_mime_type", "response_schema", "response_json_schema",
              "response_modalities", "candidate_count", "max_output_tokens", "temperature", "top_p", "top_k",
              "seed", "presence_penalty", "frequency_penalty", "response_logprobs", "logprobs",
              "thinking_config", "media_resolution", "speech_config", "enable_enhanced_civic_answers")  # fmt: skip
RATE_LIMITS_URL = "https://ai.google.dev/gemini-api/docs/rate-limits"


def snake(name: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", r"_\1", name).lower()


def fields(obj: dict, known: tuple[str, ...]) -> tuple[dict, str | None]:
    """``obj`` keyed by snake_case names, and the first unknown name as the client wrote it."""
    out = {}
    for key, value in obj.items():
        name = snake(key)
        if name not in known:
            return out, key
        out[name] = value
    return out, None


def error(code: int, status: str, message: str, details: list | None = None) -> Reply:
    err = {"code": code, "message": message, "status": status}
    if details:
        err["details"] = details
    return Reply(code, {"error": err})


def invalid(message: str, field: str | None = None) -> Reply:
    violation = {"description": message} if field is None else {"field": field, "description": message}
    details = [{"@type": "type.googleapis.com/google.rpc.BadRequest", "fieldViolations": [violation]}]
    unknown = message.startswith("Invalid JSON payload")
    reply = error(400, "INVALID_ARGUMENT", message, details if unknown else None)
    reply.rejected = "shape"
    return reply


def unknown_name(name: str, at: str | None) -> Reply:
    where = f" at '{at}'" if at else ""
    return invalid(f'Invalid JSON payload received. Unknown name "{name}"{where}: Cannot find field.', at)


def check_key(headers, query, api_key: str | None) -> Reply | None:
    """The key comes in ``x-goog-api-key`` or ``?key=``; checked when the provider has one."""
    if api_key is None:
        return None
    given = headers.get("x-goog-api-key") or query.get("key")
    if given == api_key:
        return None
    if given is None:
        reply = error(403, "PERMISSION_DENIED", "Method doesn't allow unregistered callers (callers without "
                      "established identity). Please use API Key or other form of API consumer identity to "
                      "call this API.")  # fmt: skip
    else:
        info = {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID",
                "domain": "googleapis.com", "metadata": {"service": "generativelanguage.googleapis.com"}}  # fmt: skip
        reply = error(400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.", [info])
    reply.rejected = "auth"
    return reply


def model_not_found(model: str, version: str, method: str = "generateContent") -> Reply:
    reply = error(404, "NOT_FOUND", f"models/{model} is not found for API version {version}, or is not "
                  f"supported for {method}. Call ListModels to see the list of available models and "
                  f"their supported methods.")  # fmt: skip
    reply.rejected = "shape"
    return reply


def _content(raw, at: str, pre: str, *, roles: bool = True) -> Reply | None:
    if not isinstance(raw, dict):
        return invalid(f"Invalid value at '{at}' (type.googleapis.com/google.ai.generativelanguage.v1beta."
                       f"Content), {raw!r}")  # fmt: skip
    content, bad = fields(raw, CONTENT)
    if bad:
        return unknown_name(bad, at)
    if roles and "role" in content and content["role"] not in ("user", "model", ""):
        return invalid("Please use a valid role: user, model.")
    parts = content.get("parts")
    if not isinstance(parts, list) or not parts:
        return invalid(f"* {pre}.parts: contents.parts must not be empty.\n")
    for j, raw_part in enumerate(parts):
        pat = f"{at}.parts[{j}]"
        if not isinstance(raw_part, dict):
            return invalid(f"Invalid value at '{pat}' (type.googleapis.com/google.ai.generativelanguage."
                           f"v1beta.Part), {raw_part!r}")  # fmt: skip
        part, bad = fields(raw_part, PART)
        if bad:
            return unknown_name(bad, pat)
        if "text" in part and not isinstance(part["text"], str):
            return invalid(f"Invalid value at '{pat}.text' (TYPE_STRING), {part['text']!r}")
        if not any(k in part for k in PART_DATA):
            return invalid(f"* {pre}.parts[{j}].data: required oneof field 'data' must have one initialized "
                           f"field\n")  # fmt: skip
    return None


def _number(cfg: dict, key: str, low, high, *, integer=False) -> Reply | None:
    if key not in cfg:
        return None
    value, at = cfg[key], f"generation_config.{key}"
    if integer and not is_int(value):
        return invalid(f"Invalid value at '{at}' (TYPE_INT32), {value!r}")
    if not integer and not is_number(value):
        return invalid(f"Invalid value at '{at}' (TYPE_FLOAT), {value!r}")
    if (low is not None and value < low) or (high is not None and value > high):
        span = f"[{low}, {high}]" if high is not None else f">= {low}"
        return invalid(f"* GenerateContentRequest.{at}: {key} must be in the range {span}\n")
    return None


def _generation(raw) -> Reply | None:
    if not isinstance(raw, dict):
        return invalid(f"Invalid value at 'generation_config' (type.googleapis.com/google.ai."
                       f"generativelanguage.v1beta.GenerationConfig), {raw!r}")  # fmt: skip
    cfg, bad = fields(raw, GENERATION)
    if bad:
        return unknown_name(bad, "generation_config")
    problem = (_number(cfg, "temperature", 0.0, 2.0) or _number(cfg, "top_p", 0.0, 1.0)
               or _number(cfg, "top_k", 1, None, integer=True)
               or _number(cfg, "max_output_tokens", 1, None, integer=True)
               or _number(cfg, "candidate_count", 1, 8, integer=True))  # fmt: skip
    if problem:
        return problem
    stops = cfg.get("stop_sequences")
    if stops is not None:
        if not isinstance(stops, list) or not all(isinstance(s, str) for s in stops):
            return invalid(f"Invalid value at 'generation_config.stop_sequences' (TYPE_STRING), {stops!r}")
        if len(stops) > 5:
            return invalid("* GenerateContentRequest.generation_config.stop_sequences: the number of "
                           "stop_sequences must be at most 5\n")  # fmt: skip
    return None


def validate(raw) -> Reply | None:
    """The rejection the real API would send (None: the request is valid)."""
    if not isinstance(raw, dict):
        return invalid(f"Invalid JSON payload received. Expected an object, got {raw!r}.")
    body, bad = fields(raw, TOP)
    if bad:
        return unknown_name(bad, None)
    contents = body.get("contents")
    if not isinstance(contents, list) or not contents:
        return invalid("* GenerateContentRequest.contents: contents is not specified\n")
    for i, content in enumerate(contents):
        problem = _content(content, f"contents[{i}]", f"GenerateContentRequest.contents[{i}]")
        if problem:
            return problem
    if body.get("system_instruction") is not None:
        # the system instruction's role is not read (the reference: "role" is optional there)
        problem = _content(body["system_instruction"], "system_instruction",
                           "GenerateContentRequest.system_instruction", roles=False)  # fmt: skip
        if problem:
            return problem
    if body.get("generation_config") is not None:
        return _generation(body["generation_config"])
    return None


def _texts(content: dict) -> list[str]:
    return [p["text"] for p in content.get("parts", []) if isinstance(p.get("text"), str)]


def call(raw: dict, model: str, default_max_tokens: int, stream: str | None = None) -> Call:
    body, _ = fields(raw, TOP)
    texts = _texts(body["system_instruction"]) if body.get("system_instruction") else []
    for content in body["contents"]:
        texts.extend(_texts(content))
    gen, _ = fields(body.get("generation_config") or {}, GENERATION)
    return Call(texts=texts, last_text=" ".join(_texts(body["contents"][-1])),
                max_tokens=gen.get("max_output_tokens") or default_max_tokens, model=model,
                stop_sequences=list(gen.get("stop_sequences") or []), stream=stream)  # fmt: skip


def _usage(usage: Usage) -> dict:
    meta = {"promptTokenCount": usage.prompt, "candidatesTokenCount": usage.completion,
            "totalTokenCount": usage.prompt + usage.completion,
            "promptTokensDetails": [{"modality": "TEXT", "tokenCount": usage.prompt}]}  # fmt: skip
    if usage.cache_read:
        meta["cachedContentTokenCount"] = usage.cache_read
        meta["cacheTokensDetails"] = [{"modality": "TEXT", "tokenCount": usage.cache_read}]
    if not usage.completion:
        del meta["candidatesTokenCount"]
    return meta


def _ending(name: str, c: Call, usage: Usage) -> tuple[str, str]:
    """(finishReason, text) of an answer."""
    return (
        "MAX_TOKENS" if usage.completion >= c.max_tokens else "STOP",
        f"[{name}] " + "tok " * usage.completion,
    )


def answer(name: str, c: Call, usage: Usage) -> dict:
    """candidates[0] with finishReason; usageMetadata (promptTokenCount includes cachedContentTokenCount)."""
    finish, text = _ending(name, c, usage)
    return {
        "candidates": [{"content": {"parts": [{"text": text}], "role": "model"}, "finishReason": finish,
                        "index": 0}],
        "usageMetadata": _usage(usage),
        "modelVersion": c.model,
        "responseId": uuid.uuid4().hex[:22],
    }  # fmt: skip


def blocked(c: Call, usage: Usage) -> dict:
    """A prompt blocked for safety: 200, promptFeedback.blockReason, no candidates."""
    ratings = [{"category": cat, "probability": prob} for cat, prob in (
        ("HARM_CATEGORY_SEXUALLY_EXPLICIT", "NEGLIGIBLE"), ("HARM_CATEGORY_HATE_SPEECH", "NEGLIGIBLE"),
        ("HARM_CATEGORY_HARASSMENT", "NEGLIGIBLE"), ("HARM_CATEGORY_DANGEROUS_CONTENT", "HIGH"))]  # fmt: skip
    return {"promptFeedback": {"blockReason": "SAFETY", "safetyRatings": ratings},
            "usageMetadata": _usage(Usage(usage.prompt, 0, usage.cache_read)), "modelVersion": c.model,
            "responseId": uuid.uuid4().hex[:22]}  # fmt: skip


SSE_FRAMING = Framing("sse", "\r\n", "text/event-stream")
ARRAY_FRAMING = Framing("json", content_type="application/json; charset=UTF-8")


def stream_plan(name: str, c: Call, usage: Usage, chunks: int, *, blocked_prompt: bool = False) -> StreamPlan:
    """streamGenerateContent: one GenerateContentResponse per text piece (same responseId), each with the
    usageMetadata so far (candidatesTokenCount growing); the last carries finishReason and the totals —
    the end (there is no end marker). ``alt=sse``: ``data: <json>`` events (CRLF line ends); without it a
    JSON array of the same responses. A blocked prompt: one response with promptFeedback."""
    framing = SSE_FRAMING if c.stream == "sse" else ARRAY_FRAMING
    if blocked_prompt:
        return StreamPlan(framing, tail=[(None, blocked(c, usage))], error=stream_error())
    finish, text = _ending(name, c, usage)
    pieces = split_text(text, chunks)
    response_id = uuid.uuid4().hex[:22]
    content: list[Event] = []
    sent = 0
    for i, piece in enumerate(pieces):
        sent += len(piece)
        last = i == len(pieces) - 1
        so_far = usage.completion if last else usage.completion * sent // len(text)
        candidate: dict = {"content": {"parts": [{"text": piece}], "role": "model"}, "index": 0}
        if last:
            candidate["finishReason"] = finish
        content.append((None, {"candidates": [candidate],
                               "usageMetadata": _usage(Usage(usage.prompt, so_far, usage.cache_read)),
                               "modelVersion": c.model, "responseId": response_id}))  # fmt: skip
    return StreamPlan(framing, content=content, error=stream_error())


def stream_error() -> Event:
    """An error object in the stream (what the SDKs look for: a chunk starting ``{"error":``)."""
    return (None, {"error": {"code": 503, "message": "The model is overloaded. Please try again later.",
                             "status": "UNAVAILABLE"}})  # fmt: skip


def duration(seconds: float) -> str:
    """A google.protobuf.Duration in JSON: "47s", "1.25s"."""
    ms = max(1, math.ceil(seconds * 1000))
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms / 1000:g}s"


QUOTAS = {  # limit -> (quotaMetric, quotaId)
    "requests": ("generativelanguage.googleapis.com/generate_content_free_tier_requests",
                 "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"),
    "tokens": ("generativelanguage.googleapis.com/generate_content_free_tier_input_token_count",
               "GenerateContentInputTokensPerModelPerMinute-FreeTier"),
    "per_day": ("generativelanguage.googleapis.com/generate_content_free_tier_requests",
                "GenerateRequestsPerDayPerProjectPerModel-FreeTier"),
}  # fmt: skip


def quota_exhausted(limit: str, value: int, model: str, retry_in: float) -> Reply:
    """429 RESOURCE_EXHAUSTED with a QuotaFailure naming the quota and a RetryInfo.retryDelay."""
    metric, quota_id = QUOTAS[limit]
    delay = duration(retry_in)
    message = (f"You exceeded your current quota, please check your plan and billing details. For more "
               f"information on this error, head to: {RATE_LIMITS_URL}.\n* Quota exceeded for metric: "
               f"{metric}, limit: {value}, model: {model}\nPlease retry in {delay}.")  # fmt: skip
    violation = {"quotaMetric": metric, "quotaId": quota_id,
                 "quotaDimensions": {"location": "global", "model": model}, "quotaValue": str(value)}  # fmt: skip
    details = [
        {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [violation]},
        {"@type": "type.googleapis.com/google.rpc.Help",
         "links": [{"description": "Learn more about Gemini API quotas", "url": RATE_LIMITS_URL}]},
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": delay},
    ]  # fmt: skip
    return error(429, "RESOURCE_EXHAUSTED", message, details)


def form(name: str, model: str, minute_real: float) -> Reply:
    """A named fault form (sim/kind_config.py KIND_FORMS["gemini"]); the scripted per-day and per-minute
    forms ask to retry in one simulated minute — short, as the real per-day answer's delay is."""
    if name == "overloaded":
        return error(503, "UNAVAILABLE", "The model is overloaded. Please try again later.")
    if name == "unavailable":
        return error(503, "UNAVAILABLE", "The service is currently unavailable.")
    if name == "server_error":
        return error(500, "INTERNAL", "An internal error has occurred. Please retry or report in "
                     "https://developers.generativeai.google/guide/troubleshooting")  # fmt: skip
    if name in ("rate_limit", "per_minute"):
        return quota_exhausted("requests", 0, model, minute_real)
    if name == "per_day":
        return quota_exhausted("per_day", 0, model, minute_real)
    raise ValueError(f"not a gemini error form: {name}")
