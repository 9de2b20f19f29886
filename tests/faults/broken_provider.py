"""A deliberately broken OpenAI-compatible provider, run as its own process.

    python -m tests.faults.broken_provider [--port 0]     # prints "PORT <n>" on its first stdout line

Every path ``/{mode}/v1/chat/completions`` answers in one broken way (the ``mode_*`` methods);
``/ok/...``, and any request whose last message's content is exactly "normal", answer normally.
The server counts every request as it arrives (before its body is read, whatever the answer) by its
``X-Request-ID`` (the gateway sends the item's custom_id; missing = "") and by mode:
``GET /counts`` → ``{"by_mode": {...}, "by_request": {...}}``; per mode (= the provider's name in the
tests) and request id, in the simulator's shape: ``GET /_sim/requests`` →
``{"providers": {mode: {request_id: count}}}``. ``POST /_sim/reset`` zeroes all of them.
Standard library + aiohttp only (no Django), so it is a plain separate process.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import sys
from collections import Counter

from aiohttp import web

FIVE_MB = 5 * 1024 * 1024
GZIP_BOMB_BYTES = 64 * 1024 * 1024  # 64 MB of zeros, about 64 KB compressed


def completion(
    content: str, usage: str = '{"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}'
) -> bytes:
    """An OpenAI-style answer as raw JSON text (so it can carry what json.dumps would never write)."""
    return (
        '{"id": "x", "object": "chat.completion", "model": "broken", '
        f'"choices": [{{"index": 0, "message": {{"role": "assistant", "content": {content}}}, '
        f'"finish_reason": "stop"}}], "usage": {usage}}}'
    ).encode()


def _is_normal(body: bytes) -> bool:
    try:
        return json.loads(body)["messages"][-1]["content"] == "normal"
    except (ValueError, LookupError, TypeError):
        return False


def _bomb() -> bytes:
    out = gzip.compress(b"0" * GZIP_BOMB_BYTES, compresslevel=9)
    return out


class Broken:
    def __init__(self) -> None:
        self.by_mode: Counter = Counter()
        self.by_request: Counter = Counter()
        self.by_mode_request: dict[str, Counter] = {}
        self._bomb = _bomb()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        mode = request.match_info["mode"]
        rid = request.headers.get("X-Request-ID", "")
        # counted on arrival: a client that gives up while sending its body still made a request
        self.by_mode[mode] += 1
        self.by_request[rid] += 1
        self.by_mode_request.setdefault(mode, Counter())[rid] += 1
        body = await request.read()
        if _is_normal(body):  # a normal request answers normally on every path
            return await self.mode_ok(request)
        answer = getattr(self, "mode_" + mode, None)
        if answer is None:
            return web.Response(status=404, text="unknown mode")
        return await answer(request)

    async def counts(self, request: web.Request) -> web.Response:
        return web.json_response({"by_mode": self.by_mode, "by_request": self.by_request})

    async def request_counts(self, request: web.Request) -> web.Response:
        return web.json_response({"providers": self.by_mode_request})

    async def reset(self, request: web.Request) -> web.Response:
        self.by_mode.clear()
        self.by_request.clear()
        self.by_mode_request.clear()
        return web.json_response({"ok": True})

    # ---- modes ----------------------------------------------------------------------------------------
    async def mode_ok(self, request):
        return web.Response(body=completion('"fine"'), content_type="application/json")

    async def mode_nul(self, request):  # a NUL character in the content (PostgreSQL text/jsonb refuse it)
        return web.Response(body=completion('"a\\u0000b"'), content_type="application/json")

    async def mode_surrogate(self, request):  # a lone surrogate escape
        return web.Response(body=completion('"x\\ud800y"'), content_type="application/json")

    async def mode_raw_surrogate(self, request):  # a lone surrogate as raw (invalid) UTF-8 bytes
        body = completion('"x__y"').replace(b"__", b"\xed\xa0\x80")
        return web.Response(body=body, content_type="application/json")

    async def mode_nan(self, request):  # NaN in usage (not JSON; Python would parse it)
        usage = '{"prompt_tokens": NaN, "completion_tokens": 2, "total_tokens": NaN}'
        return web.Response(body=completion('"n"', usage), content_type="application/json")

    async def mode_huge_usage(self, request):  # 10^12 tokens
        usage = '{"prompt_tokens": 1000000000000, "completion_tokens": 1, "total_tokens": 1000000000001}'
        return web.Response(body=completion('"h"', usage), content_type="application/json")

    async def mode_big(self, request):  # a 5 MB answer
        return web.Response(body=completion('"' + "x" * FIVE_MB + '"'), content_type="application/json")

    async def mode_big_chunked(self, request):  # 5 MB with no Content-Length (chunked), never-ending JSON
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        await response.write(b'{"choices": [{"message": {"content": "')
        for _ in range(FIVE_MB // 65536 + 1):
            await response.write(b"x" * 65536)
        await response.write(b'"}}]}')
        await response.write_eof()
        return response

    async def mode_gzip_bomb(self, request):  # ~64 KB on the wire, 64 MB decompressed
        return web.Response(
            body=self._bomb, headers={"Content-Encoding": "gzip", "Content-Type": "application/json"}
        )

    async def mode_html(self, request):  # a proxy's error page with status 200
        return web.Response(
            text="<html><body>Bad gateway at 10.1.2.3</body></html>", content_type="text/html"
        )

    async def mode_reset_429(self, request):  # a 429 asking for a 3-year pause, no Retry-After
        return web.json_response(
            {"error": {"message": "rate limited"}},
            status=429,
            headers={"x-ratelimit-reset-requests": "99999999", "x-ratelimit-reset-tokens": "99999999"},
        )

    async def mode_odd_headers(self, request):  # a 503 whose rate-limit headers make no sense
        return web.json_response(
            {"error": {"message": "upstream 10.0.0.7:8443 failed, see https://internal.example/x"}},
            status=503,
            headers={
                "Retry-After": "1e309",
                "x-ratelimit-reset-requests": "-5m",
                "x-ratelimit-reset-tokens": "NaN",
                "x-ratelimit-reset": "9" * 60,
            },
        )

    async def mode_deep(self, request):  # 100 000 nested lists
        return web.Response(body=completion("[" * 100_000 + "]" * 100_000), content_type="application/json")

    async def mode_timeout(self, request):  # never answers in time
        await asyncio.sleep(3600)
        return web.Response(status=204)


def app() -> web.Application:
    broken = Broken()
    application = web.Application(client_max_size=64 * 1024 * 1024)
    application.router.add_post("/{mode}/v1/chat/completions", broken.handle)
    application.router.add_get("/counts", broken.counts)
    application.router.add_get("/_sim/requests", broken.request_counts)
    application.router.add_post("/_sim/reset", broken.reset)
    return application


async def main(port: int) -> None:
    runner = web.AppRunner(app(), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    bound = site._server.sockets[0].getsockname()[1]
    print(f"PORT {bound}", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    try:
        asyncio.run(main(parser.parse_args().port))
    except KeyboardInterrupt:
        sys.exit(0)
