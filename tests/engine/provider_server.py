"""A real local HTTP provider server for engine tests (aiohttp in a background thread).

Every provider is served at /{name}/v1/chat/completions, and at any other POST path under /{name}/
(the other kinds' endpoints: /{name}/messages, /{name}/models/{model}:generateContent — a behaviour
shapes those kinds' error answers; its 200s are OpenAI-shaped). A behaviour decides each answer:
``behaviour(name, request_id, attempt_no, body) -> Reply``; the server counts every request as its
request line arrives (``hits``; per provider and X-Request-ID, "" when missing: ``request_counts()``,
also ``GET /_sim/requests`` → ``{"providers": {name: {request_id: count}}}`` as the simulator answers).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from aiohttp import web


@dataclass
class Reply:
    status: int = 200
    delay: float = 0.0
    headers: dict = field(default_factory=dict)
    usage: dict | None = None  # for error replies that still report usage
    body: dict | None = None


def ok_reply(delay: float = 0.0) -> Reply:
    return Reply(200, delay)


@dataclass
class Hit:
    provider: str
    request_id: str
    attempt: int
    at: float
    status: int
    max_tokens: int


def usage_for(body: dict) -> dict:
    prompt = sum(len(str(m.get("content", ""))) for m in body.get("messages", [])) // 4 + 1
    completion = min(int(body.get("max_tokens") or 16), 16)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


class ProviderServer:
    def __init__(self, default: Callable | None = None):
        self.behaviours: dict[str, Callable] = {}
        self.default = default or (lambda name, rid, attempt, body: ok_reply())
        self.hits: list[Hit] = []
        self.in_flight = 0
        self.max_in_flight: Counter = Counter()
        self._in_flight_by: Counter = Counter()
        self._attempts: dict[tuple[str, str], int] = defaultdict(int)
        self._lock = threading.Lock()
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/{name}/v1"

    # ---- counting --------------------------------------------------------------------------------------
    def count(self, provider: str | None = None) -> int:
        with self._lock:
            return sum(1 for h in self.hits if provider is None or h.provider == provider)

    def by_provider(self) -> Counter:
        with self._lock:
            return Counter(h.provider for h in self.hits)

    def hits_for(self, request_id: str) -> list[Hit]:
        with self._lock:
            return [h for h in self.hits if h.request_id == request_id]

    def request_counts(self) -> dict[str, dict[str, int]]:
        """{provider: {request_id: requests}}, the simulator's shape (tests.exactly_once reads it)."""
        with self._lock:
            out: dict[str, dict[str, int]] = {}
            for (name, rid), n in self._attempts.items():
                out.setdefault(name, {})[rid] = n
            return out

    async def _requests(self, request: web.Request) -> web.Response:
        return web.json_response({"providers": self.request_counts()})

    # ---- server ----------------------------------------------------------------------------------------
    async def _handle(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        rid = request.headers.get("X-Request-ID", "")
        hit = Hit(name, rid, 0, time.monotonic(), 0, 0)
        with self._lock:  # counted as soon as the request line arrives
            self._attempts[(name, rid)] += 1
            hit.attempt = attempt = self._attempts[(name, rid)]
            self.hits.append(hit)
            self._in_flight_by[name] += 1
            self.max_in_flight[name] = max(self.max_in_flight[name], self._in_flight_by[name])
        try:
            body = await request.json()
        except BaseException:
            with self._lock:
                self._in_flight_by[name] -= 1
            raise
        behaviour = self.behaviours.get(name, self.default)
        reply = behaviour(name, rid, attempt, body)
        hit.status, hit.max_tokens = reply.status, int(body.get("max_tokens") or 0)
        try:
            if reply.delay:
                await asyncio.sleep(reply.delay)
        finally:
            with self._lock:
                self._in_flight_by[name] -= 1
        if reply.status == 200:
            payload = reply.body or {
                "id": f"cmpl-{rid}-{attempt}",
                "object": "chat.completion",
                "model": body.get("model"),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": f"answer to {rid}"},
                        "finish_reason": "stop",
                    }
                ],
                "usage": usage_for(body),
            }
        else:
            payload = reply.body or {
                "error": {"message": f"simulated {reply.status} from {name}", "type": "simulated"}
            }
            if reply.usage:
                payload["usage"] = reply.usage
        return web.json_response(payload, status=reply.status, headers=reply.headers)

    def _serve(self) -> None:
        async def main():
            app = web.Application()
            app.router.add_post("/{name}/v1/chat/completions", self._handle)
            app.router.add_get("/_sim/requests", self._requests)
            app.router.add_post("/{name}/{tail:.*}", self._handle)  # the other kinds' endpoints
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)  # port 0: the kernel picks a free one
            await site.start()
            self.port = site._server.sockets[0].getsockname()[1]
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            self._ready.set()
            await self._stop.wait()
            await runner.cleanup()

        asyncio.run(main())

    def start(self) -> ProviderServer:
        self._thread = threading.Thread(target=self._serve, name="provider-server", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("provider server did not start")
        return self

    def stop(self) -> None:
        if self._loop and self._stop:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread:
            self._thread.join(10)


def idle_dropping_handler(body: bytes, accepted: list, closed: list | None = None):
    """An asyncio.start_server handler: keep-alive HTTP/1.1 that answers every POST with `body` and
    drops a connection idle for 0.2 s (a short server-side keep-alive). Appends to `accepted` per
    connection, and to `closed` once the server has closed it."""

    async def handle(reader, writer):
        accepted.append(1)
        try:
            while True:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 0.2)
                length = next(
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length")
                )
                await reader.readexactly(length)
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                    + str(len(body)).encode()
                    + b"\r\n\r\n"
                    + body
                )
                await writer.drain()
        except (TimeoutError, asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()
        if closed is not None:
            await writer.wait_closed()  # the socket is shut: the client's side has its FIN
            closed.append(1)

    return handle


async def idle_keepalive_rounds(make_client, messages: list) -> tuple[list, list, int]:
    """A client (``make_client(port)``) against a raw server that drops every connection idle for 0.2 s:
    three calls, each after the server has closed the previous connection, then a burst of 8.
    Returns (the three outcomes, the burst's outcomes, connections the server accepted)."""
    from tests.waiting import wait_until_async

    body = b'{"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 1}}'
    accepted: list = []
    closed: list = []
    server = await asyncio.start_server(idle_dropping_handler(body, accepted, closed), "127.0.0.1", 0)
    client = make_client(server.sockets[0].getsockname()[1])
    try:
        outcomes = []
        for _ in range(3):
            outcomes.append(await client.chat(messages))
            await wait_until_async(
                lambda: len(closed) == len(accepted), 30, what="the server to drop the idle connection"
            )
        burst = await asyncio.gather(*(client.chat(messages) for _ in range(8)))
    finally:
        await client.aclose()
        server.close()
        await server.wait_closed()
    return outcomes, list(burst), len(accepted)
