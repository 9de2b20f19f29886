"""The provider simulator's HTTP server (aiohttp).

Routes (one port, many providers; a provider answers only on its kind's route, any other -> 404):
  POST /{name}/v1/chat/completions               kind openai (base_url http://HOST:PORT/{name}/v1)
  POST /{name}/v1/embeddings                     kind openai embeddings (sim/wire_embeddings.py)
  POST /{name}/v1/messages                       kind anthropic (base_url .../{name}/v1)
  POST /{name}/v1beta/models/{model}:generateContent
  POST /{name}/v1beta/models/{model}:streamGenerateContent[?alt=sse]
  POST /{name}/v1beta/models/{model}:embedContent | :batchEmbedContents
                                                 kind gemini (base_url .../{name}/v1beta; also /v1/...)
  POST /{name}/openai/deployments/{deployment}/chat/completions?api-version=...
  POST /{name}/openai/deployments/{deployment}/embeddings?api-version=...
                                                 kind azure_openai (base_url .../{name})
  POST /{name}/model/{modelId}/converse[-stream] kind bedrock (base_url .../{name}; SigV4-signed)
  GET  /{name}/v1/models             the provider's model
  GET  /_sim/health                  liveness + provider names (+ kinds)
  GET  /_sim/counters                per-provider counters (see sim/counters.py), shape_rejections included,
                                     requests by_endpoint (chat, embeddings) and embedding_inputs
  GET  /_sim/requests                {"providers": {name: {request_id: count}}}: every request that reached
                                     a provider's route, whatever its answer (400/401/404, 429, forced,
                                     outage, 503, 529, 500, hang, disconnect), by its X-Request-ID header
                                     (missing: ""); the gateway sends the item's custom_id there
  GET  /_sim/trace                   per-request rows [provider, tag, status, arrival_s, done_s, tokens] (seconds
                                     since start/reset), when the config sets trace_tag_regex
  POST /_sim/reset                   zero counters, request counts and trace, refill buckets, restart
                                     outage clock, scripts, the simulated day and spending
  POST /_sim/config                  replace the whole configuration (body: a config document), then reset
                                     (request counts included)
  GET  /_sim/batch_lines             {"providers": {name: {custom_id: n}}}: the lines of every provider batch
                                     created, by custom id (real-time calls are never in it, batch lines
                                     never in /_sim/requests)
  the batch APIs (issue #23): OpenAI files + batches under /{name}/v1/files and /{name}/v1/batches, Azure
  under /{name}/openai/files and /{name}/openai/batches (sim/batches_openai.py), Anthropic message batches
  under /{name}/v1/messages/batches (sim/batches_anthropic.py); their state: sim/batch_store.py

The /_sim/ control API is sim/control.py. The request pipeline (the same for every kind) is described
in sim/provider.py; each kind's validation,
answers, headers and fault forms in sim/kinds.py and sim/wire_*.py; streamed answers ("stream": true,
streamGenerateContent) in sim/streaming.py.
"""

from __future__ import annotations

import asyncio
import time

from aiohttp import web

from sim import batches_anthropic, batches_openai, control
from sim.batch_store import COUNTER_KEYS as BATCH_COUNTER_KEYS
from sim.batch_store import BatchStore
from sim.config import SimConfig, load_config
from sim.kinds import fmt_duration
from sim.provider import SimProvider
from sim.shared_keys import SharedKeys
from sim.wire_openai import error_body, validate_openai

__all__ = ["SimProvider", "SimState", "build_app", "error_body", "fmt_duration", "serve", "start"]

STATE_KEY = web.AppKey("sim_state", object)
validate_body = validate_openai  # the OpenAI route's body check (kept for callers of the old name)


class SimState:
    def __init__(self, config: SimConfig):
        self.batch_stores: dict[str, BatchStore] = {}  # the same dict for the app's life (routes hold it)
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
        self.batch_stores.clear()
        self.batch_stores.update({name: BatchStore(p.cfg, config.time_scale, config.seed, p.kind)
                                  for name, p in self.providers.items()})  # fmt: skip
        self._share_keys(now)

    def _share_keys(self, now: float) -> None:
        """(Re)build the shared keys (sim/shared_keys.py), hand their buckets to their providers and
        start their outside clients (on the running loop; without one: at the app's startup)."""
        old = getattr(self, "shared", None)
        if old is not None:
            old.stop()
        self.shared = SharedKeys(self.config.shared_keys, self.config.time_scale, now)
        self.shared.attach(self.providers)
        if _loop_running():
            self.shared.start()

    def record(self, provider: str, tag, status: int, arrival: float, done: float, tokens: int = 0) -> None:
        self.trace.append(
            [provider, tag, status, round(arrival - self.started, 6), round(done - self.started, 6), tokens]
        )

    def reset(self) -> None:
        now = asyncio.get_running_loop().time()
        self.started = now
        self.trace = []
        for p in self.providers.values():
            p.reset(now)
        self._share_keys(now)
        for store in self.batch_stores.values():
            store.reset()

    def request_counts(self) -> dict:
        return {"providers": {name: p.counters.by_request_id for name, p in self.providers.items()}}

    def batch_lines(self) -> dict:
        return {"providers": {name: dict(b.lines_by_custom_id) for name, b in self.batch_stores.items()}}

    def counters(self) -> dict:
        now = asyncio.get_running_loop().time()
        per = {name: {**p.counters.snapshot(), **self.batch_stores[name].snapshot(now)}
               for name, p in self.providers.items()}  # fmt: skip
        keys = ["requests", "ok", "rate_limited_429", "status_4xx", "status_5xx", "billed_tokens",
                "delivered_tokens", "billed_prompt_tokens", "billed_completion_tokens",
                "delivered_prompt_tokens", "delivered_completion_tokens", "in_flight", "shape_rejections",
                "auth_rejections", "streams_started", "streams_completed", "streams_errored", "streams_cut",
                "streams_aborted_by_client", *BATCH_COUNTER_KEYS]  # fmt: skip
        totals = {k: sum(s[k] for s in per.values()) for k in keys}
        return {
            "time_scale": self.config.time_scale,
            "minute_s": self.config.minute_s,
            "uptime_s": round(now - self.started, 3),
            "providers": per,
            "totals": totals,
            "shared_keys": self.shared.snapshot(now),
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

    def route(kind: str):
        async def handler(request: web.Request) -> web.StreamResponse:
            provider = state.providers.get(request.match_info["name"])
            if provider is None:
                return web.json_response(error_body("Unknown provider.", "invalid_request_error"), status=404)
            return await provider.handle(request, kind)

        return handler

    async def models(request: web.Request) -> web.Response:
        provider = state.providers.get(request.match_info["name"])
        if provider is None:
            return web.json_response(error_body("Unknown provider.", "invalid_request_error"), status=404)
        data = [{"id": provider.cfg.model, "object": "model", "owned_by": "sim", "created": 0}]
        return web.json_response({"object": "list", "data": data})

    async def start_outside(app: web.Application) -> None:
        state.shared.start()  # no-op when already started

    async def stop_outside(app: web.Application) -> None:
        state.shared.stop()

    app.on_startup.append(start_outside)
    app.on_cleanup.append(stop_outside)
    control.register(app, state)  # /_sim/*, before the provider routes' catch-all
    app.router.add_post("/{name}/v1/chat/completions", route("openai"))
    app.router.add_post("/{name}/v1/{endpoint:embeddings}", route("openai"))
    app.router.add_post("/{name}/v1/messages", route("anthropic"))
    app.router.add_post("/{name}/{version:v1beta|v1}/models/{model_method:[^/]+}", route("gemini"))
    app.router.add_post("/{name}/openai/deployments/{deployment}/chat/completions", route("azure_openai"))
    app.router.add_post(
        "/{name}/openai/deployments/{deployment}/{endpoint:embeddings}", route("azure_openai")
    )
    app.router.add_post("/{name}/model/{model_id}/{op:converse|converse-stream}", route("bedrock"))
    batches_openai.register(app, state.batch_stores)
    batches_anthropic.register(app, state.batch_stores)
    # any other POST under a provider reached it with a wrong URL: counted, 404, a shape rejection
    app.router.add_post("/{name}/{tail:.*}", route("none"))
    app.router.add_get("/{name}/v1/models", models)
    return app


async def start(
    config,
    host: str = "127.0.0.1",
    port: int = 0,
    shutdown_timeout: float = 1.0,
    handler_cancellation: bool = True,
) -> tuple[web.AppRunner, int]:
    """Start serving on the running loop; returns (runner, bound port). Stop with ``runner.cleanup()``.

    ``handler_cancellation``: aiohttp cancels a request's handler when its client disconnects (how a
    client leaving mid-stream or mid-latency is seen at once); False only to test the fallback (a stream
    then sees the closed transport at its next event)."""
    app = build_app(config)
    runner = web.AppRunner(
        app, access_log=None, handler_cancellation=handler_cancellation, shutdown_timeout=shutdown_timeout
    )
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
