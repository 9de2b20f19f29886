"""One simulated provider: its limits, RNG, counters and the request pipeline (the same for every kind).

Pipeline, in order (the first rule that answers wins):
  1. the route is not the provider kind's -> 404 (a shape rejection)
  2. the kind's preflight: Azure api-version / deployment, Gemini model and method, the key -> the kind's
     404 / 401 / 403 / 400
  3. malformed JSON or a body the real API would refuse -> the kind's 400 (``shape_rejections``)
  4. ``x-sim-force-status: N`` request header -> N (not billed); ``x-sim-retry-after`` sets Retry-After
  5. ``status_script`` (next scripted status, if not 200) / ``error_script`` (next named form, if not
     "ok") / a ``[[sim:...]]`` content trigger -> that answer (not billed)
  6. ``fixed_status`` -> that status (not billed)
  7. spending exhausted (``spend_exhausted_after`` requests served) -> the spend form, for good
  8. inside an outage window -> the kind's 503; inside an ``overload`` window -> its overloaded form
  9. a limit short (RPD, RPM, TPM, ITPM, OTPM: sim/limits.py) -> the kind's 429 (not billed, untouched)
 10. admitted: every bucket charged; in-flight >= max_concurrency -> 503 (the admission still counts)
 11. accepted: latency slept (hang_rate: hang_seconds; error_rate_500: a 500 after processing, billed)
     then 200 in the kind's shape with usage (cache reads / writes per the configured ratios); answer
     forms (Gemini blocked, Azure output_filter, Anthropic refusal) are processed and billed like any.
     A streamed request (sim/streaming.py) sleeps the same latency, then streams its answer: in flight
     until its last byte, billed when it ends however it ends, delivered when completed; its shape
     (``stream_chunks``, ``chunk_delay_ms``, ``stream_error_after``, ``stream_cut_after``, or their
     ``[[sim:...=N]]`` triggers) is read after step 3 (a bad trigger value: 400).
An accepted request whose client disconnects mid-way is billed (the provider did the work).
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import re

from aiohttp import web

from sim.config import ProviderConfig
from sim.counters import ProviderCounters
from sim.kind_config import KIND_FORMS
from sim.kinds import ANSWER_FORMS, adapter, endpoint_of
from sim.limits import Charge, Limits
from sim.prompt_cache import PromptCache
from sim.stream_answer import stream_answer
from sim.streaming import StreamShape, stream_shape
from sim.tokens import estimate_text_tokens
from sim.wire_common import Call, Reply, Usage, split_cache
from sim.wire_embeddings import embedding_tokens


class SimProvider:
    """One simulated provider: its buckets, RNG, counters and request handling."""

    def __init__(
        self, cfg: ProviderConfig, time_scale: float, seed: int | None, now: float, tracer=None, tag_re=None
    ):
        self.cfg = cfg
        self.time_scale = time_scale
        self.tracer = tracer  # callable(provider, tag, status, t_arrival, t_done, tokens) or None
        self.tag_re = re.compile(tag_re) if tag_re else None
        self.seed = cfg.seed if cfg.seed is not None else seed
        self.kind = adapter(cfg, 60.0 / time_scale)
        self.reset(now)

    def reset(self, now: float) -> None:
        self.epoch = now
        self.script_pos = 0
        # a seeded provider replays the same random draws after every reset (comparable benchmark rows)
        self.rng = random.Random(self.seed)
        self.counters = ProviderCounters(minute_s=60.0 / self.time_scale)
        self.limits = Limits(self.cfg, self.time_scale, now)
        self.served = 0  # requests accepted for processing (spend_exhausted_after counts these)
        self.prompt_cache = PromptCache(self.cfg.kind, self.cfg.prompt_cache, self.time_scale)

    # --- helpers ------------------------------------------------------------------------------
    def in_window(self, window, now: float) -> bool:
        if window is None or window.duration_s <= 0:
            return False
        period = window.period_s / self.time_scale
        phase = (now - self.epoch - window.offset_s / self.time_scale) % period
        return phase < window.duration_s / self.time_scale

    def in_outage(self, now: float) -> bool:
        return self.in_window(self.cfg.outage, now)

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

    def reply(self, r: Reply) -> web.Response:
        c = self.counters
        c.record_status(r.status)
        if r.rejected == "shape":
            c.shape_rejections += 1
        elif r.rejected == "auth":
            c.auth_rejections += 1
        return web.json_response(r.body, status=r.status, headers=r.headers or None)

    def form_reply(self, name: str, call: Call | None) -> web.Response:
        c = self.counters
        c.by_form[name] += 1
        if name == "overloaded":
            c.overloaded += 1
        return self.reply(self.kind.form(name, call))

    # --- the pipeline -------------------------------------------------------------------------
    async def handle(self, request: web.Request, route_kind: str) -> web.StreamResponse:
        box: dict = {}
        if self.tracer is None:
            return await self._handle(request, route_kind, box)
        loop_time = asyncio.get_running_loop().time
        arrival = loop_time()
        status = 499  # client went away
        try:
            response = await self._handle(request, route_kind, box)
            status = response.status
            return response
        finally:
            self.tracer(self.cfg.name, box.get("tag"), status, arrival, loop_time(), box.get("tokens", 0))

    def tag_of(self, call: Call) -> str | None:
        m = self.tag_re.search(call.last_text)
        return m.group(1) if m else None

    async def _read(self, request: web.Request, route_kind: str) -> Call | Reply:
        """Steps 1-3: the validated call, or the rejection the real API would send."""
        if route_kind != self.cfg.kind:
            message = f"provider {self.cfg.name!r} (kind {self.cfg.kind}) has no route {request.path}"
            return Reply(404, {"error": {"message": message, "type": "not_found"}}, rejected="shape")
        problem = self.kind.preflight(request)
        if problem:
            return problem
        verify = getattr(self.kind, "verify", None)  # a kind that signs each request (bedrock: SigV4)
        if verify is not None:
            problem = verify(request, await request.read())
            if problem:
                return problem
        try:
            body = await request.json(loads=json.loads)
        except (json.JSONDecodeError, UnicodeDecodeError, ValueError):
            return self.kind.not_json()
        problem = self.kind.validate(body, request)
        return problem or self.kind.call(body, request)

    def forced(self, status: int, retry_after: str | None) -> web.Response:
        self.counters.forced += 1
        return self.reply(self.kind.forced(status, retry_after))

    def usage_for(self, call: Call, now: float) -> tuple[Usage, Charge]:
        """The call's usage (cache reads / writes: the fixed ratios when configured, else the prompt
        cache's rule; sim/prompt_cache.py) and what the rate limiter charges for it."""
        native = self.cfg.native
        if call.endpoint == "embeddings":  # every input counted on its own; no prompt cache, no completion
            prompt = embedding_tokens(call.texts)
            return Usage(prompt, 0), Charge(1, prompt, prompt, 0)
        prompt = estimate_text_tokens(call.texts)
        write = native.cache_write_ratio if self.cfg.kind == "anthropic" else 0.0
        if native.cache_read_ratio or write:
            split = split_cache(prompt, native.cache_read_ratio, write)
        else:
            call.cache_lookup = lookup = self.prompt_cache.lookup(call.texts, call.breakpoints, now)
            read = min(lookup.read, prompt)
            split = Usage(prompt, 0, read, min(lookup.write, prompt - read))
        tokens = prompt if self.kind.input_only_tpm else prompt + call.max_tokens
        return split, Charge(1, tokens, prompt - split.cache_read, call.max_tokens)

    async def _handle(self, request: web.Request, route_kind: str, box: dict) -> web.StreamResponse:
        c = self.counters
        c.record_request(request.headers.get("X-Request-ID", ""), endpoint_of(request))
        cfg = self.cfg
        loop_time = asyncio.get_running_loop().time

        call = await self._read(request, route_kind)
        if isinstance(call, Reply):
            return self.reply(call)
        shape: StreamShape | None = None
        if call.stream is not None:
            wanted = stream_shape(cfg, call.last_text, self.time_scale)
            if isinstance(wanted, str):  # a bad [[sim:stream_...=N]] trigger: the test's mistake, not a shape
                return self.reply(Reply(400, {"error": {"message": wanted, "type": "sim"}}))
            shape = wanted
        if self.tag_re is not None:
            box["tag"] = self.tag_of(call)
        scripted = scripted_answer(self, request, call)
        if isinstance(scripted, web.Response):
            return scripted
        answer_form = scripted

        now = loop_time()
        spend = cfg.native.spend_form_name
        if spend is not None and self.served >= (cfg.native.spend_exhausted_after or 0):
            c.spend_exhausted += 1
            return self.form_reply(spend, call)
        if self.in_outage(now):
            c.outage_503 += 1
            return self.form_reply("unavailable", call)
        if self.in_window(cfg.native.overload, now):
            return self.form_reply("overloaded", call)
        split, charge = self.usage_for(call, now)
        short = self.limits.check(charge, now)
        if short is not None and short.wait == math.inf:
            return self.reply(self.kind.too_large(charge.tokens))
        if short is not None:
            if short.limit == "per_day":
                c.per_day_429 += 1
            return self.reply(self.kind.rate_limited(short.limit, short.wait, self.limits.state(now), call))
        self.limits.take(charge, now)
        headers = self.kind.headers(self.limits.state(now))
        c.record_admit(now, charge.tokens)
        box["tokens"] = charge.tokens  # what its TPM limiter counted (the trace's tokens)
        # The rate limiter (the provider's edge) has counted this request; the backend may still be full.
        if cfg.max_concurrency and c.in_flight >= cfg.max_concurrency:
            c.overload_503 += 1
            busy = self.kind.busy()
            busy.headers = {**busy.headers, **headers}
            return self.reply(busy)
        return await self._process(request, call, split, answer_form, loop_time, shape)

    async def _process(
        self,
        request: web.Request,
        call: Call,
        split: Usage,
        answer_form,
        loop_time,
        shape: StreamShape | None,
    ) -> web.StreamResponse:
        c, cfg = self.counters, self.cfg
        c.record_accept(loop_time())
        c.record_cache(split.cache_read, split.cache_write)
        self.served += 1
        no_completion = answer_form == "blocked" or call.endpoint == "embeddings"
        completion = 0 if no_completion else self.completion_tokens(call.max_tokens)
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
            self.finish_call(split, completion, call.max_tokens, loop_time())
            raise
        if call.cache_lookup is not None and not fail:  # the answer begins: its prefixes become readable
            self.prompt_cache.put(call.cache_lookup, loop_time())
            c.prompt_cache_evictions = self.prompt_cache.evictions
        if shape is not None and not fail:  # a stream is in flight (and billed) until its last byte
            return await stream_answer(self, request, call, split, completion, answer_form, shape, loop_time)
        self.finish_call(split, completion, call.max_tokens, loop_time())
        headers = self.kind.headers(self.limits.state(loop_time()))  # as the answer leaves (OTPM adjusted)
        if fail:
            c.errors_500 += 1
            failed = self.kind.form("server_error", call)
            failed.headers = {**failed.headers, **headers}
            return self.reply(failed)
        c.deliver(split.prompt, completion)
        if call.endpoint == "embeddings":
            c.embedding_inputs += len(call.texts)
        if answer_form is not None:
            c.by_form[answer_form] += 1
        usage = Usage(split.prompt, completion, split.cache_read, split.cache_write)
        return self.reply(Reply(200, self.kind.answer(call, usage, answer_form), headers))

    def finish_call(self, split: Usage, completion: int, max_tokens: int, now: float) -> None:
        """The work is done (answered or not): billed, OTPM's unused reservation given back, measured."""
        c = self.counters
        c.bill(split.prompt, completion)
        c.record_done(now)
        self.limits.give_back_output(max_tokens - completion, now)
        c.record_tokens(now, split.prompt - split.cache_read, completion)


def scripted_answer(p: SimProvider, request: web.Request, call: Call) -> web.Response | str | None:
    """Steps 4-6: a forced / scripted / triggered answer, or an answer form to apply later."""
    cfg, native = p.cfg, p.cfg.native
    forced = request.headers.get("x-sim-force-status")
    if forced is not None:
        try:
            status = int(forced)
            assert 200 <= status <= 599
        except (ValueError, AssertionError):
            return p.reply(Reply(400, {"error": {"message": "x-sim-force-status: not a status code",
                                                    "type": "sim"}}))  # fmt: skip
        if status != 200:
            return p.forced(status, request.headers.get("x-sim-retry-after"))
    name = None
    if p.script_pos < len(cfg.status_script):
        status = cfg.status_script[p.script_pos]
        p.script_pos += 1
        if status != 200:
            return p.forced(status, None)
    elif p.script_pos < len(native.error_script):
        name = native.error_script[p.script_pos]
        p.script_pos += 1
    trigger = call.trigger(KIND_FORMS[cfg.kind])  # another kind's trigger is plain text
    if name in (None, "ok") and trigger is not None:
        name = trigger
    if name is not None and name != "ok":
        if name in ANSWER_FORMS:
            return name
        return p.form_reply(name, call)
    if cfg.fixed_status is not None and cfg.fixed_status != 200:
        return p.forced(cfg.fixed_status, None)
    return None
