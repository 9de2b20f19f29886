"""The provider simulator's HTTP server (aiohttp).

Routes (one port, many providers):
  POST /{name}/v1/chat/completions   OpenAI-compatible chat completion
  GET  /{name}/v1/models             the provider's model
  GET  /_sim/health                  liveness + provider names
  GET  /_sim/counters                per-provider counters (see sim/counters.py)
  GET  /_sim/requests                {"providers": {name: {request_id: count}}}: every request that reached
                                     a provider's chat route, whatever its answer (400/401, 429, forced,
                                     outage, 503, 500, hang, disconnect), by its X-Request-ID header
                                     (missing: ""); the gateway sends the item's custom_id there
  GET  /_sim/trace                   per-request rows [provider, tag, status, arrival_s, done_s] (seconds
                                     since start/reset), when the config sets trace_tag_regex
  POST /_sim/reset                   zero counters, request counts and trace, refill buckets, restart
                                     outage clock, scripts
  POST /_sim/config                  replace the whole configuration (body: a config document), then reset
                                     (request counts included)

Request pipeline for a provider, in order (the first rule that answers wins):
  1. malformed body -> 400; wrong/missing key when the provider has ``api_key`` -> 401
  2. ``x-sim-force-status: N`` request header -> N (not billed); ``x-sim-retry-after`` sets Retry-After
  3. ``status_script`` (next scripted status, if not 200) -> that status (not billed)
  4. ``fixed_status`` -> that status (not billed)
  5. inside an outage window -> 503 (not billed)
  6. RPM or TPM bucket short -> 429 with Retry-After (not billed, buckets untouched)
  7. admitted: both buckets charged (1 request; prompt + max_tokens tokens)
  8. in-flight requests >= max_concurrency -> 503 (not billed; the admission above still counts)
  9. accepted: latency slept
     - with probability hang_rate: sleeps hang_seconds (real) before answering
     - with probability error_rate_500: 500 after processing (billed)
     - otherwise 200 with ``usage`` (billed and delivered)
     An accepted request whose client disconnects mid-way is billed (the provider did the work).
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import re
import time
import uuid

from aiohttp import web

from sim.buckets import Bucket
from sim.config import ProviderConfig, SimConfig, load_config
from sim.counters import ProviderCounters
from sim.tokens import estimate_prompt_tokens

STATE_KEY = web.AppKey("sim_state", object)


def fmt_duration(seconds: float) -> str:
    """Go-style duration as OpenAI sends in x-ratelimit-reset-*: '250ms', '1.5s'."""
    if seconds < 1:
        return f"{math.ceil(seconds * 1000)}ms"
    return f"{seconds:.3f}".rstrip("0").rstrip(".") + "s"


def error_body(message: str, type_: str, code: str | None = None) -> dict:
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


class SimProvider:
    """One simulated provider: its buckets, RNG, counters and request handling."""

    def __init__(
        self, cfg: ProviderConfig, time_scale: float, seed: int | None, now: float, tracer=None, tag_re=None
    ):
        self.cfg = cfg
        self.time_scale = time_scale
        self.tracer = tracer  # callable(provider, tag, status, t_arrival, t_done) or None
        self.tag_re = re.compile(tag_re) if tag_re else None
        self.seed = cfg.seed if cfg.seed is not None else seed
        self.reset(now)

    def reset(self, now: float) -> None:
        cfg, scale = self.cfg, self.time_scale
        self.epoch = now
        self.script_pos = 0
        # a seeded provider replays the same random draws after every reset (comparable benchmark rows)
        self.rng = random.Random(self.seed)
        self.counters = ProviderCounters(minute_s=60.0 / scale)
        self.req_bucket = (
            Bucket(cfg.rpm * scale / 60.0, max(1.0, cfg.rpm / 60.0 * cfg.burst_seconds), now)
            if cfg.rpm
            else None
        )
        self.tok_bucket = (
            Bucket(cfg.tpm * scale / 60.0, cfg.tpm / 60.0 * cfg.burst_seconds, now) if cfg.tpm else None
        )

    # --- helpers ------------------------------------------------------------------------------
    def in_outage(self, now: float) -> bool:
        o = self.cfg.outage
        if o is None or o.duration_s <= 0:
            return False
        period = o.period_s / self.time_scale
        phase = (now - self.epoch - o.offset_s / self.time_scale) % period
        return phase < o.duration_s / self.time_scale

    def latency_s(self) -> float:
        cfg = self.cfg
        ms = cfg.median_ms * math.exp(cfg.sigma * self.rng.gauss(0.0, 1.0)) if cfg.sigma else cfg.median_ms
        ms = max(cfg.min_ms, ms)
        if cfg.max_ms is not None:
            ms = min(cfg.max_ms, ms)
        return ms / 1000.0 / self.time_scale

    def completion_tokens(self, max_tokens: int) -> int:
        c = self.cfg.completion
        if c is None:
            return max_tokens
        value = c.median * math.exp(c.sigma * self.rng.gauss(0.0, 1.0)) if c.sigma else c.median
        return max(1, min(max_tokens, max(c.minimum, round(value))))

    def rate_headers(self, now: float) -> dict[str, str]:
        h: dict[str, str] = {}
        if self.req_bucket is not None:
            b = self.req_bucket
            b.refill(now)
            h["x-ratelimit-limit-requests"] = str(int(round(self.cfg.rpm * self.time_scale)))
            h["x-ratelimit-remaining-requests"] = str(max(0, int(b.level)))
            h["x-ratelimit-reset-requests"] = fmt_duration(b.reset_after(now))
        if self.tok_bucket is not None:
            b = self.tok_bucket
            b.refill(now)
            h["x-ratelimit-limit-tokens"] = str(int(round(self.cfg.tpm * self.time_scale)))
            h["x-ratelimit-remaining-tokens"] = str(max(0, int(b.level)))
            h["x-ratelimit-reset-tokens"] = fmt_duration(b.reset_after(now))
        return h

    def reply(self, status: int, body: dict, headers: dict | None = None) -> web.Response:
        self.counters.record_status(status)
        return web.json_response(body, status=status, headers=headers)

    # --- the pipeline -------------------------------------------------------------------------
    async def handle(self, request: web.Request) -> web.Response:
        box: dict = {}
        if self.tracer is None:
            return await self._handle(request, box)
        loop_time = asyncio.get_running_loop().time
        arrival = loop_time()
        status = 499  # client went away
        try:
            response = await self._handle(request, box)
            status = response.status
            return response
        finally:
            self.tracer(self.cfg.name, box.get("tag"), status, arrival, loop_time())

    def tag_of(self, messages: list) -> str | None:
        content = messages[-1].get("content")
        if isinstance(content, str):
            m = self.tag_re.search(content)
            if m:
                return m.group(1)
        return None

    async def _handle(self, request: web.Request, box: dict) -> web.Response:
        c = self.counters
        c.record_request(request.headers.get("X-Request-ID", ""))
        cfg = self.cfg
        loop_time = asyncio.get_running_loop().time

        if cfg.api_key is not None:
            if request.headers.get("Authorization", "") != f"Bearer {cfg.api_key}":
                return self.reply(401, error_body("Incorrect API key provided.", "invalid_request_error",
                                                  "invalid_api_key"))  # fmt: skip
        try:
            body = await request.json(loads=json.loads)
        except (json.JSONDecodeError, UnicodeDecodeError, ValueError):
            return self.reply(400, error_body("Request body is not valid JSON.", "invalid_request_error"))
        problem = validate_body(body)
        if problem:
            return self.reply(400, error_body(problem, "invalid_request_error"))
        if self.tag_re is not None:
            box["tag"] = self.tag_of(body["messages"])

        forced = request.headers.get("x-sim-force-status")
        if forced is not None:
            try:
                status = int(forced)
                assert 200 <= status <= 599
            except (ValueError, AssertionError):
                return self.reply(400, error_body("x-sim-force-status: not a status code", "sim"))
            if status != 200:
                return self.forced(status, request.headers.get("x-sim-retry-after"))
        if self.script_pos < len(cfg.status_script):
            status = cfg.status_script[self.script_pos]
            self.script_pos += 1
            if status != 200:
                return self.forced(status, None)
        if cfg.fixed_status is not None and cfg.fixed_status != 200:
            return self.forced(cfg.fixed_status, None)

        now = loop_time()
        if self.in_outage(now):
            c.outage_503 += 1
            return self.reply(503, error_body("The server is temporarily unavailable (outage).",
                                              "server_error", "outage"), {"Retry-After": "1"})  # fmt: skip
        messages = body["messages"]
        prompt = estimate_prompt_tokens(messages)
        max_tokens = body.get("max_completion_tokens") or body.get("max_tokens") or cfg.default_max_tokens
        charge = prompt + max_tokens
        wait_r = self.req_bucket.wait_for(1, now) if self.req_bucket else 0.0
        wait_t = self.tok_bucket.wait_for(charge, now) if self.tok_bucket else 0.0
        if wait_t == math.inf:
            return self.reply(400, error_body(
                f"Request too large: {charge} tokens (prompt + max_tokens) exceed the provider's "
                f"token bucket capacity.", "invalid_request_error", "request_too_large"))  # fmt: skip
        wait = max(wait_r, wait_t)
        if wait > 0:
            headers = self.rate_headers(now)
            headers["Retry-After"] = str(max(1, math.ceil(wait)))
            headers["retry-after-ms"] = str(math.ceil(wait * 1000))
            kind = "requests" if wait_r >= wait_t else "tokens"
            return self.reply(429, error_body(
                f"Rate limit reached for {kind} on {cfg.name}. Please try again in {wait:.3f}s.",
                kind, "rate_limit_exceeded"), headers)  # fmt: skip
        if self.req_bucket:
            self.req_bucket.take(1, now)
        if self.tok_bucket:
            self.tok_bucket.take(charge, now)
        headers = self.rate_headers(now)
        c.record_admit(now, charge)
        # The rate limiter (the provider's edge) has counted this request; the backend may still be full.
        if cfg.max_concurrency and c.in_flight >= cfg.max_concurrency:
            c.overload_503 += 1
            return self.reply(503, error_body("Server overloaded: too many concurrent requests.",
                                              "server_error", "overloaded"), headers)  # fmt: skip
        c.record_accept(now)

        completion = self.completion_tokens(max_tokens)
        hang = cfg.hang_rate > 0 and self.rng.random() < cfg.hang_rate
        fail = cfg.error_rate_500 > 0 and self.rng.random() < cfg.error_rate_500
        delay = cfg.hang_seconds if hang else self.latency_s()
        if hang:
            c.hangs += 1
        try:
            if delay > 0:
                await asyncio.sleep(delay)
        except asyncio.CancelledError:
            c.disconnects += 1
            c.bill(prompt, completion)
            c.record_done(loop_time())
            raise
        c.bill(prompt, completion)
        c.record_done(loop_time())
        if fail:
            c.errors_500 += 1
            return self.reply(500, error_body("The server had an error while processing your request.",
                                              "server_error"), headers)  # fmt: skip
        c.deliver(prompt, completion)
        model = body.get("model") or cfg.model
        answer = {
            "id": f"chatcmpl-sim-{uuid.uuid4().hex[:16]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "system_fingerprint": "sim",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": f"[{cfg.name}] " + "tok " * completion},
                    "finish_reason": "length" if completion >= max_tokens else "stop",
                    "logprobs": None,
                }
            ],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            },  # fmt: skip
        }
        return self.reply(200, answer, headers)

    def forced(self, status: int, retry_after: str | None) -> web.Response:
        self.counters.forced += 1
        headers = {}
        if status in (429, 503):
            headers["Retry-After"] = retry_after or "1"
        type_ = "server_error" if status >= 500 else "invalid_request_error"
        if status == 429:
            type_ = "requests"
        return self.reply(status, error_body(f"Simulated status {status}.", type_, f"sim_{status}"), headers)


def validate_body(body) -> str | None:
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
    if body.get("stream"):
        return "'stream' is not supported by the simulator."
    return None


class SimState:
    def __init__(self, config: SimConfig):
        self.install(config)

    def install(self, config: SimConfig) -> None:
        now = asyncio.get_event_loop().time() if _loop_running() else time.monotonic()
        self.config = config
        self.started = now
        self.trace: list[list] = []
        tracer = self.record if config.trace_tag_regex else None
        self.providers = {
            name: SimProvider(p, config.time_scale, config.seed, now, tracer, config.trace_tag_regex)
            for name, p in config.providers.items()
        }

    def record(self, provider: str, tag, status: int, arrival: float, done: float) -> None:
        self.trace.append(
            [provider, tag, status, round(arrival - self.started, 6), round(done - self.started, 6)]
        )

    def reset(self) -> None:
        now = asyncio.get_running_loop().time()
        self.started = now
        self.trace = []
        for p in self.providers.values():
            p.reset(now)

    def request_counts(self) -> dict:
        return {"providers": {name: p.counters.by_request_id for name, p in self.providers.items()}}

    def counters(self) -> dict:
        now = asyncio.get_running_loop().time()
        per = {name: p.counters.snapshot() for name, p in self.providers.items()}
        keys = ["requests", "ok", "rate_limited_429", "status_4xx", "status_5xx", "billed_tokens",
                "delivered_tokens", "billed_prompt_tokens", "billed_completion_tokens",
                "delivered_prompt_tokens", "delivered_completion_tokens", "in_flight"]  # fmt: skip
        totals = {k: sum(s[k] for s in per.values()) for k in keys}
        return {
            "time_scale": self.config.time_scale,
            "minute_s": self.config.minute_s,
            "uptime_s": round(now - self.started, 3),
            "providers": per,
            "totals": totals,
        }


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
        return True
    except RuntimeError:
        return False


def build_app(config: SimConfig | dict | str) -> web.Application:
    state = SimState(load_config(config))
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app[STATE_KEY] = state

    async def chat(request: web.Request) -> web.Response:
        provider = state.providers.get(request.match_info["name"])
        if provider is None:
            return web.json_response(error_body("Unknown provider.", "invalid_request_error"), status=404)
        return await provider.handle(request)

    async def models(request: web.Request) -> web.Response:
        provider = state.providers.get(request.match_info["name"])
        if provider is None:
            return web.json_response(error_body("Unknown provider.", "invalid_request_error"), status=404)
        data = [{"id": provider.cfg.model, "object": "model", "owned_by": "sim", "created": 0}]
        return web.json_response({"object": "list", "data": data})

    async def health(request: web.Request) -> web.Response:
        return web.json_response(
            {"ok": True, "providers": sorted(state.providers), "time_scale": state.config.time_scale}
        )

    async def counters(request: web.Request) -> web.Response:
        return web.json_response(state.counters())

    async def requests(request: web.Request) -> web.Response:
        return web.json_response(state.request_counts())

    async def trace(request: web.Request) -> web.Response:
        fields = ["provider", "tag", "status", "arrival_s", "done_s"]
        return web.json_response({"fields": fields, "enabled": state.config.trace_tag_regex is not None,
                                  "rows": state.trace})  # fmt: skip

    async def reset(request: web.Request) -> web.Response:
        state.reset()
        return web.json_response({"ok": True})

    async def set_config(request: web.Request) -> web.Response:
        try:
            config = load_config(await request.json())
        except ValueError as exc:
            return web.json_response({"ok": False, "error": str(exc)}, status=400)
        state.install(config)
        return web.json_response({"ok": True, "providers": sorted(state.providers)})

    app.router.add_get("/_sim/health", health)
    app.router.add_get("/_sim/counters", counters)
    app.router.add_get("/_sim/requests", requests)
    app.router.add_get("/_sim/trace", trace)
    app.router.add_post("/_sim/reset", reset)
    app.router.add_post("/_sim/config", set_config)
    app.router.add_post("/{name}/v1/chat/completions", chat)
    app.router.add_get("/{name}/v1/models", models)
    return app


async def start(
    config, host: str = "127.0.0.1", port: int = 0, shutdown_timeout: float = 1.0
) -> tuple[web.AppRunner, int]:
    """Start serving on the running loop; returns (runner, bound port). Stop with ``runner.cleanup()``."""
    app = build_app(config)
    runner = web.AppRunner(app, access_log=None, handler_cancellation=True, shutdown_timeout=shutdown_timeout)
    await runner.setup()
    site = web.TCPSite(runner, host, port, backlog=1024, reuse_address=True)
    await site.start()
    bound = runner.addresses[0][1]
    return runner, bound


async def serve(config, host: str = "127.0.0.1", port: int = 8900, duration: float | None = None) -> None:
    """Serve until cancelled (or for ``duration`` seconds). Prints one 'listening on URL' line."""
    runner, bound = await start(config, host, port)
    print(f"sim listening on http://{host}:{bound}", flush=True)
    try:
        if duration is None:
            await asyncio.Event().wait()
        else:
            await asyncio.sleep(duration)
    finally:
        await runner.cleanup()
