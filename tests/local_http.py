"""A real HTTP server for the HTTP-layer tests: aiohttp on 127.0.0.1 (a port of its own), started inside
the test's event loop, recording every request it gets (method, path, query, headers, body) and answering
with what the test set for (method, path). What the engine's clients send is read from here, as a
provider would see it (no mocked transport).

    async with LocalHttp() as server:
        server.on("POST", "/v1/chat/completions", reply(200, json={...}))
        ... client with base_url=server.url("/v1") ...
    server.last("POST", "/v1/chat/completions").json()

A request nobody set an answer for gets a 599 and is recorded too, so a test sees it went astray.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from multidict import CIMultiDictProxy

Answer = Callable[[web.Request], web.StreamResponse | Awaitable[web.StreamResponse]]


@dataclass(frozen=True)
class Seen:
    method: str
    path: str
    query: Mapping[str, str]
    headers: CIMultiDictProxy[str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def reply(
    status: int = 200,
    *,
    json: Any = None,
    text: str | None = None,
    body: bytes | None = None,
    headers: Mapping[str, str] | None = None,
) -> Answer:
    """An answer made afresh for each request (an aiohttp response can be sent once)."""

    def answer(request: web.Request) -> web.StreamResponse:
        if json is not None:
            return web.json_response(json, status=status, headers=headers)
        if text is not None:
            return web.Response(status=status, text=text, headers=headers)
        return web.Response(status=status, body=body or b"", headers=headers)

    return answer


class LocalHttp:
    def __init__(self) -> None:
        self.answers: dict[tuple[str, str], Answer] = {}
        self.seen: list[Seen] = []
        self.port = 0
        self._runner: web.AppRunner | None = None

    def on(self, method: str, path: str, answer: Answer) -> None:
        self.answers[(method.upper(), path)] = answer

    def url(self, path: str = "") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def calls(self, method: str, path: str) -> list[Seen]:
        return [s for s in self.seen if (s.method, s.path) == (method.upper(), path)]

    def last(self, method: str, path: str) -> Seen:
        calls = self.calls(method, path)
        assert calls, (
            f"no {method} {path} reached the server (it saw {[(s.method, s.path) for s in self.seen]})"
        )
        return calls[-1]

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        self.seen.append(Seen(request.method, request.path, dict(request.query), request.headers, body))
        answer = self.answers.get((request.method, request.path))
        if answer is None:
            return web.Response(status=599, text=f"no answer set for {request.method} {request.path}")
        result = answer(request)
        return await result if inspect.isawaitable(result) else result

    async def __aenter__(self) -> LocalHttp:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
