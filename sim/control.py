"""The simulator's control API under ``/_sim/`` (what tests and benchmarks read and set; the routes are
listed in sim/server.py's docstring): health, counters, request counts, the trace, batch lines, reset and
a new configuration. Registered by ``sim.server.build_app`` before the provider routes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

from sim.config import load_config

if TYPE_CHECKING:
    from sim.server import SimState

TRACE_FIELDS = ["provider", "tag", "status", "arrival_s", "done_s", "tokens"]


def register(app: web.Application, state: SimState) -> None:
    async def health(request: web.Request) -> web.Response:
        return web.json_response(
            {
                "ok": True,
                "providers": sorted(state.providers),
                "time_scale": state.config.time_scale,
                "kinds": {name: p.cfg.kind for name, p in sorted(state.providers.items())},
            }
        )

    async def counters(request: web.Request) -> web.Response:
        return web.json_response(state.counters())

    async def requests(request: web.Request) -> web.Response:
        return web.json_response(state.request_counts())

    async def batch_lines(request: web.Request) -> web.Response:
        return web.json_response(state.batch_lines())

    async def trace(request: web.Request) -> web.Response:
        enabled = state.config.trace_tag_regex is not None
        return web.json_response({"fields": TRACE_FIELDS, "enabled": enabled, "rows": state.trace})

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
    app.router.add_get("/_sim/batch_lines", batch_lines)
    app.router.add_post("/_sim/reset", reset)
    app.router.add_post("/_sim/config", set_config)
