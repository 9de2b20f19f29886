"""One adapter per provider kind: what the request pipeline (sim/server.py) asks of a wire format.

Each adapter checks the route and the key the kind's way (``preflight``), validates the body with the real
API's rules and words (``validate``), reads it into a ``Call``, and renders answers, rate-limit headers,
429s and the named fault forms in the kind's own shapes. The pipeline itself is the same for every kind,
so limits, scripts, outages, latency and counting behave alike whatever the wire format.
"""

from __future__ import annotations

import math

from sim import sigv4
from sim import wire_anthropic as anthropic
from sim import wire_bedrock as bedrock
from sim import wire_embeddings as embeddings
from sim import wire_gemini as gemini
from sim import wire_openai as openai
from sim.config import ProviderConfig
from sim.streaming import StreamPlan
from sim.wire_common import Call, Reply, Usage

ANSWER_FORMS = {"blocked", "output_filter", "refusal"}  # processed (and billed), answered differently


def endpoint_of(request) -> str:
    """ "embeddings" for a request on an embeddings route (OpenAI's / Azure's ``/embeddings``, Gemini's
    ``:embedContent`` / ``:batchEmbedContents``), else "chat"."""
    if request.match_info.get("endpoint") == "embeddings":
        return "embeddings"
    method = request.match_info.get("model_method", "").partition(":")[2]
    return "embeddings" if method in embeddings.GEMINI_METHODS else "chat"


def fmt_duration(seconds: float) -> str:
    """Go-style duration as OpenAI sends in x-ratelimit-reset-*: '250ms', '1.5s'."""
    if seconds < 1:
        return f"{math.ceil(seconds * 1000)}ms"
    return f"{seconds:.3f}".rstrip("0").rstrip(".") + "s"


class OpenAIKind:
    """OpenAI chat completions: the simulator's original behaviour, unchanged."""

    name = "openai"
    input_only_tpm = False

    def __init__(self, cfg: ProviderConfig, minute_real: float):
        self.cfg = cfg
        self.minute_real = minute_real

    def preflight(self, request) -> Reply | None:
        if self.cfg.api_key is not None:
            if request.headers.get("Authorization", "") != f"Bearer {self.cfg.api_key}":
                reply = Reply(401, openai.error_body("Incorrect API key provided.", "invalid_request_error",
                                                     "invalid_api_key"))  # fmt: skip
                reply.rejected = "auth"
                return reply
        return None

    def not_json(self) -> Reply:
        return openai.invalid("Request body is not valid JSON.")

    def validate(self, body, request) -> Reply | None:
        if endpoint_of(request) == "embeddings":
            return embeddings.validate_openai(body, self.cfg.model)
        problem = openai.validate_openai(body)
        return openai.invalid(problem) if problem else openai.stream_problem(body)

    def call(self, body: dict, request) -> Call:
        if endpoint_of(request) == "embeddings":
            return embeddings.openai_call(body, self.cfg.model)
        return openai.call(body, self.cfg.model, self.cfg.default_max_tokens)

    def headers(self, state) -> dict[str, str]:
        h: dict[str, str] = {}
        for key in ("requests", "tokens"):
            if key in state:
                limit, remaining, reset = state[key]
                h[f"x-ratelimit-limit-{key}"] = str(limit)
                h[f"x-ratelimit-remaining-{key}"] = str(remaining)
                h[f"x-ratelimit-reset-{key}"] = fmt_duration(reset)
        return h

    def rate_limited(self, limit: str, wait: float, state, call: Call) -> Reply:
        kind = "requests" if limit == "requests" else "tokens"
        headers = {**self.headers(state), "Retry-After": str(max(1, math.ceil(wait))),
                   "retry-after-ms": str(math.ceil(wait * 1000))}  # fmt: skip
        return Reply(429, openai.error_body(
            f"Rate limit reached for {kind} on {self.cfg.name}. Please try again in {wait:.3f}s.",
            kind, "rate_limit_exceeded"), headers)  # fmt: skip

    def too_large(self, charge: int) -> Reply:
        return Reply(400, openai.error_body(
            f"Request too large: {charge} tokens (prompt + max_tokens) exceed the provider's token bucket "
            f"capacity.", "invalid_request_error", "request_too_large"))  # fmt: skip

    def form(self, name: str, call: Call | None) -> Reply:
        return openai.openai_form(name)

    def forced(self, status: int, retry_after: str | None) -> Reply:
        """A bare status (status_script, fixed_status, x-sim-force-status) in the kind's error body."""
        headers = {"Retry-After": retry_after or "1"} if status in (429, 503) else {}
        type_ = "requests" if status == 429 else "server_error" if status >= 500 else "invalid_request_error"
        return Reply(
            status, openai.error_body(f"Simulated status {status}.", type_, f"sim_{status}"), headers
        )

    def busy(self) -> Reply:
        """Over max_concurrency: the backend is full (the rate limiter already counted the request)."""
        return Reply(503, openai.error_body("Server overloaded: too many concurrent requests.", "server_error",
                                            "overloaded"))  # fmt: skip

    def answer(self, call: Call, usage: Usage, form: str | None) -> dict:
        if call.endpoint == "embeddings":
            return embeddings.openai_answer(call, usage)
        return openai.answer(self.cfg.name, call, usage)

    def stream_plan(self, call: Call, usage: Usage, form: str | None, chunks: int) -> StreamPlan:
        """The answer as the kind streams it (sim/streaming.py)."""
        return openai.stream_plan(self.cfg.name, call, usage, chunks)


class AzureKind(OpenAIKind):
    name = "azure_openai"

    def api_version(self, request) -> str:
        return request.query.get("api-version", "")

    def preflight(self, request) -> Reply | None:
        native = self.cfg.native
        if self.api_version(request) not in native.api_versions:
            return openai.azure_not_found()
        if self.cfg.api_key is not None and request.headers.get("api-key") != self.cfg.api_key:
            return openai.azure_bad_key()
        if request.match_info.get("deployment") != native.deployment:
            return openai.azure_deployment_not_found()
        return None

    def validate(self, body, request) -> Reply | None:
        if endpoint_of(request) == "embeddings":
            return embeddings.validate_openai(body, self.cfg.model, azure=True)
        return openai.validate_azure(body)

    def call(self, body: dict, request) -> Call:
        # the deployment, not the body's model, picks the model (an answer names the deployed model)
        if endpoint_of(request) == "embeddings":
            c = embeddings.openai_call(body, self.cfg.model)
        else:
            c = openai.call(body, self.cfg.model, self.cfg.default_max_tokens)
        c.model = self.cfg.model
        c.api_version = self.api_version(request)
        return c

    def headers(self, state) -> dict[str, str]:
        return openai.azure_headers(state)

    def rate_limited(self, limit: str, wait: float, state, call: Call) -> Reply:
        operation = "Embeddings" if call is not None and call.endpoint == "embeddings" else "ChatCompletions"
        return openai.azure_rate_limited(limit, wait, call.api_version if call else "", state, operation)

    def form(self, name: str, call: Call | None) -> Reply:
        return openai.azure_form(name, call.api_version if call else "")

    def answer(self, call: Call, usage: Usage, form: str | None) -> dict:
        if call.endpoint == "embeddings":
            return embeddings.openai_answer(call, usage)
        return openai.answer(self.cfg.name, call, usage, azure=True, filtered=form == "output_filter")

    def stream_plan(self, call: Call, usage: Usage, form: str | None, chunks: int) -> StreamPlan:
        return openai.stream_plan(
            self.cfg.name, call, usage, chunks, azure=True, filtered=form == "output_filter"
        )


class AnthropicKind(OpenAIKind):
    name = "anthropic"

    def preflight(self, request) -> Reply | None:
        return anthropic.check_headers(request.headers, self.cfg.api_key)

    def not_json(self) -> Reply:
        return anthropic.invalid("There was an error parsing the body of your request: not valid JSON")

    def validate(self, body, request) -> Reply | None:
        problem = anthropic.validate(body, request.headers.get("anthropic-version", ""))
        return anthropic.invalid(problem) if problem else None

    def call(self, body: dict, request) -> Call:
        return anthropic.call(body)

    def headers(self, state) -> dict[str, str]:
        return anthropic.rate_headers(state)

    def rate_limited(self, limit: str, wait: float, state, call: Call) -> Reply:
        return anthropic.rate_limited(limit, wait, state)

    def too_large(self, charge: int) -> Reply:
        return anthropic.error(413, "request_too_large", f"Request too large: {charge} tokens exceed the "
                               f"rate limit bucket's capacity.")  # fmt: skip

    def form(self, name: str, call: Call | None) -> Reply:
        return anthropic.form(name)

    def forced(self, status: int, retry_after: str | None) -> Reply:
        types = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                 404: "not_found_error", 429: "rate_limit_error", 529: "overloaded_error"}  # fmt: skip
        reply = anthropic.error(status, types.get(status, "api_error"), f"Simulated status {status}.")
        if status in (429, 529, 503):
            reply.headers = {"retry-after": retry_after or "1"}
        return reply

    def busy(self) -> Reply:
        return anthropic.form("overloaded")

    def answer(self, call: Call, usage: Usage, form: str | None) -> dict:
        return anthropic.answer(self.cfg.name, call, usage, refusal=form == "refusal")

    def stream_plan(self, call: Call, usage: Usage, form: str | None, chunks: int) -> StreamPlan:
        return anthropic.stream_plan(self.cfg.name, call, usage, chunks, refusal=form == "refusal")


class GeminiKind(OpenAIKind):
    name = "gemini"
    input_only_tpm = True  # Gemini's token quota counts input tokens

    METHODS = ("generateContent", "streamGenerateContent", *embeddings.GEMINI_METHODS)

    def preflight(self, request) -> Reply | None:
        model, _, method = request.match_info.get("model_method", "").partition(":")
        if method not in self.METHODS:
            return gemini.invalid(f"Method '{method}' is not served by the simulator (generateContent, "
                                  f"streamGenerateContent, embedContent and batchEmbedContents only).")  # fmt: skip
        if method == "streamGenerateContent" and request.query.get("alt", "json") not in ("json", "sse"):
            return gemini.invalid(f"Invalid value at 'alt' ({request.query['alt']!r}): streamGenerateContent "
                                  f"answers alt=sse (Server-Sent Events) or alt=json (a JSON array).")  # fmt: skip
        problem = gemini.check_key(request.headers, request.query, self.cfg.api_key)
        if problem:
            return problem
        if model != self.cfg.model:
            return gemini.model_not_found(model, request.match_info.get("version", "v1beta"), method)
        return None

    def not_json(self) -> Reply:
        return gemini.invalid("Invalid JSON payload received. Unexpected token.")

    def validate(self, body, request) -> Reply | None:
        if endpoint_of(request) == "embeddings":
            parsed = embeddings.gemini_parse(body, self._method(request), self.cfg.model)
            return parsed if isinstance(parsed, Reply) else None
        return gemini.validate(body)

    def _method(self, request) -> str:
        return request.match_info.get("model_method", "").partition(":")[2]

    def call(self, body: dict, request) -> Call:
        if endpoint_of(request) == "embeddings":
            parsed = embeddings.gemini_parse(body, self._method(request), self.cfg.model)
            assert isinstance(parsed, Call)  # validate() refused the others
            return parsed
        stream = None
        if request.match_info.get("model_method", "").endswith(":streamGenerateContent"):
            stream = "sse" if request.query.get("alt") == "sse" else "json"
        return gemini.call(body, self.cfg.model, self.cfg.default_max_tokens, stream)

    def headers(self, state) -> dict[str, str]:
        return {}  # Gemini sends no rate-limit headers

    def rate_limited(self, limit: str, wait: float, state, call: Call) -> Reply:
        if limit == "per_day":
            return gemini.quota_exhausted(
                "per_day", self.cfg.native.rpd or 0, self.cfg.model, self.minute_real
            )
        value = state.get(limit, (0,))[0]
        return gemini.quota_exhausted("requests" if limit == "requests" else "tokens", value, self.cfg.model,
                                      wait)  # fmt: skip

    def too_large(self, charge: int) -> Reply:
        return gemini.error(400, "INVALID_ARGUMENT", f"The input token count ({charge}) exceeds the maximum "
                            f"number of tokens allowed.")  # fmt: skip

    def form(self, name: str, call: Call | None) -> Reply:
        return gemini.form(name, self.cfg.model, self.minute_real)

    def forced(self, status: int, retry_after: str | None) -> Reply:
        statuses = {400: "INVALID_ARGUMENT", 403: "PERMISSION_DENIED", 404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED",
                    500: "INTERNAL", 503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"}  # fmt: skip
        return gemini.error(status, statuses.get(status, "UNKNOWN"), f"Simulated status {status}.")

    def busy(self) -> Reply:
        return self.form("overloaded", None)

    def answer(self, call: Call, usage: Usage, form: str | None) -> dict:
        if call.endpoint == "embeddings":
            return embeddings.gemini_answer(call)
        if form == "blocked":
            return gemini.blocked(call, usage)
        return gemini.answer(self.cfg.name, call, usage)

    def stream_plan(self, call: Call, usage: Usage, form: str | None, chunks: int) -> StreamPlan:
        return gemini.stream_plan(self.cfg.name, call, usage, chunks, blocked_prompt=form == "blocked")


class BedrockKind(OpenAIKind):
    """Amazon Bedrock Converse / ConverseStream, SigV4-signed (sim/wire_bedrock.py, sim/sigv4.py)."""

    name = "bedrock"

    def preflight(self, request) -> Reply | None:
        if request.match_info.get("model_id") != self.cfg.model:
            return bedrock.invalid("The provided model identifier is invalid.")
        return None

    def verify(self, request, raw: bytes) -> Reply | None:
        """The request's SigV4 signature (after preflight, before the body is read as JSON)."""
        native = self.cfg.native
        found = sigv4.problem(
            request.method,
            request.rel_url.raw_path,
            request.rel_url.raw_query_string,
            request.headers,
            raw,
            access_key_id=native.aws_access_key_id,
            secret=self.cfg.api_key,
            region=native.region,
        )
        if found is None:
            return None
        status = 400 if found[0] == "IncompleteSignatureException" else 403
        reply = bedrock.error(status, *found)
        reply.rejected = "auth"
        return reply

    def not_json(self) -> Reply:
        reply = bedrock.error(400, "SerializationException", "Unexpected token in the request body.")
        reply.rejected = "shape"
        return reply

    def validate(self, body, request) -> Reply | None:
        return bedrock.validate(body)

    def call(self, body: dict, request) -> Call:
        stream = request.match_info.get("op") == "converse-stream"
        return bedrock.call(body, self.cfg.model, self.cfg.default_max_tokens, stream)

    def headers(self, state) -> dict[str, str]:
        return {}  # Bedrock sends no rate-limit headers

    def rate_limited(self, limit: str, wait: float, state, call: Call) -> Reply:
        return bedrock.form("rate_limit")

    def too_large(self, charge: int) -> Reply:
        return bedrock.error(
            400, "ValidationException", f"Input is too long for requested model ({charge} tokens)."
        )

    def form(self, name: str, call: Call | None) -> Reply:
        return bedrock.form(name)

    def forced(self, status: int, retry_after: str | None) -> Reply:
        exception = bedrock.STATUS_EXCEPTIONS.get(status, "InternalServerException")
        return bedrock.error(status, exception, f"Simulated status {status}.")

    def busy(self) -> Reply:
        return bedrock.form("overloaded")

    def answer(self, call: Call, usage: Usage, form: str | None) -> dict:
        return bedrock.answer(self.cfg.name, call, usage)

    def stream_plan(self, call: Call, usage: Usage, form: str | None, chunks: int) -> StreamPlan:
        return bedrock.stream_plan(self.cfg.name, call, usage, chunks)


KIND_CLASSES = {
    "openai": OpenAIKind,
    "azure_openai": AzureKind,
    "anthropic": AnthropicKind,
    "gemini": GeminiKind,
    "bedrock": BedrockKind,
}


def adapter(cfg: ProviderConfig, minute_real: float) -> OpenAIKind:
    return KIND_CLASSES[cfg.kind](cfg, minute_real)
