"""A load generator in a process of its own (aiohttp, uvloop when installed), driven over stdin/stdout:
one JSON command per line in, one JSON answer per line out. The benchmarks start it with
``LoadGen(targets)``; by hand:

    .venv/bin/python bench/loadgen.py --targets targets.json
    {"op": "open", "target": "gw", "rate": 500, "duration": 2.5}
    {"op": "closed", "target": "direct", "n": 500, "concurrency": 1}
    {"op": "stream", "target": "gw", "n": 50, "concurrency": 1}
    {"op": "quit"}

targets.json: ``{"gw": {"url": ..., "headers": {...}, "body": {...}}, "direct": {...}}`` — each target is
one POST (its own keep-alive connection pool, kept between commands).

- ``open``: an open loop: request i is due at start + i / rate, sent then whatever the answers before it
  did (a late send is sent at once, never skipped); latency counts from the due time (so a generator
  that falls behind shows it) — ``lag_ms`` is how late the sends were. The answer waits for every
  request of the window.
- ``closed``: ``concurrency`` callers, each sending its next request when its last one is answered.
- ``stream``: closed loop of ``stream: true`` calls read as Server-Sent Events: time to the first
  content chunk (``ttft_ms``), the gaps between content chunks (``gap_ms``) and the whole call.

A target with ``"tagged": true`` has every ``{n}`` of its body replaced by the call's number; an open
loop with ``"record": true`` also answers ``calls``: ``[number, due, sent, done, status, error body]`` per
call (``time.perf_counter()``, which is CLOCK_MONOTONIC on Linux: the clock of the simulator's trace).

Answers: ``{"n", "ok", "fail", "errors": {"http 429": 3, "ClientOSError": 1, …}, "lat_ms": [ok
latencies], "lag_ms": [...] (open), "wall_s"}``. A failure is any answer but a 200 with a full body, or a
transport error / the 30 s timeout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time

import aiohttp

TIMEOUT = aiohttp.ClientTimeout(total=30)
now = time.perf_counter  # uvloop's loop.time() has 1 ms steps


class Target:
    def __init__(self, spec: dict):
        self.url = spec["url"]
        self.headers = {"Content-Type": "application/json", **spec.get("headers", {})}
        self.body = json.dumps(spec["body"]).encode()
        self.stream_body = json.dumps(
            {**spec["body"], "stream": True, **spec.get("stream_extra", {})}
        ).encode()
        # "tagged": every "{n}" in the body becomes the call's number (1, 2, … per target), e.g. a tag
        # the simulator's trace_tag_regex picks up
        self.tagged = bool(spec.get("tagged"))
        self.counter = 0
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0, keepalive_timeout=60), timeout=TIMEOUT
        )

    def payload(self, stream: bool = False) -> tuple[bytes, int]:
        body = self.stream_body if stream else self.body
        self.counter += 1
        if self.tagged:
            body = body.replace(b"{n}", str(self.counter).encode())
        return body, self.counter


async def one(t: Target, due: float, out: dict) -> None:
    body, n = t.payload()
    sent = now()
    try:
        async with t.session.post(t.url, data=body, headers=t.headers) as r:
            answer = await r.read()
            status = r.status
    except Exception as exc:  # noqa: BLE001 - every transport failure counts
        key = type(exc).__name__
        out["errors"][key] = out["errors"].get(key, 0) + 1
        out["fail"] += 1
        if "calls" in out:
            out["calls"].append([n, due, sent, now(), key, ""])
        return
    done = now()
    if "calls" in out:
        out["calls"].append(
            [n, due, sent, done, status, "" if status == 200 else answer[:300].decode("utf-8", "replace")]
        )
    if status == 200:
        out["ok"] += 1
        out["lat_ms"].append(round((done - due) * 1000, 4))
        if "lag_ms" in out:
            out["lag_ms"].append(round((sent - due) * 1000, 4))
    else:
        key = f"http {status}"
        out["errors"][key] = out["errors"].get(key, 0) + 1
        out["fail"] += 1


def fresh(n: int, open_loop: bool = False, record: bool = False) -> dict:
    out = {"n": n, "ok": 0, "fail": 0, "errors": {}, "lat_ms": []}
    if open_loop:
        out["lag_ms"] = []
    if record:  # per call: [number, due, sent, done, status or error, error body] (time.perf_counter())
        out["calls"] = []
    return out


async def open_loop(t: Target, rate: float, duration: float, record: bool = False) -> dict:
    n = max(1, int(rate * duration))
    out = fresh(n, open_loop=True, record=record)
    start = now() + 0.005
    tasks = []
    for i in range(n):
        due = start + i / rate
        delay = due - now()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.ensure_future(one(t, due, out)))
    await asyncio.gather(*tasks)
    out["wall_s"] = now() - start
    return out


async def closed_loop(t: Target, n: int, concurrency: int) -> dict:
    out = fresh(n)
    left = [n]

    async def caller():
        while left[0] > 0:
            left[0] -= 1
            await one(t, now(), out)

    start = now()
    await asyncio.gather(*(caller() for _ in range(concurrency)))
    out["wall_s"] = now() - start
    return out


async def one_stream(t: Target, out: dict) -> None:
    body, _n = t.payload(stream=True)
    sent = now()
    chunks: list[float] = []
    ok_end = False
    try:
        async with t.session.post(t.url, data=body, headers=t.headers) as r:
            if r.status != 200:
                await r.read()
                key = f"http {r.status}"
                out["errors"][key] = out["errors"].get(key, 0) + 1
                out["fail"] += 1
                return
            async for line in r.content:
                if not line.startswith(b"data: "):
                    continue
                data = line[6:].strip()
                if data == b"[DONE]":
                    ok_end = True
                    continue
                event = json.loads(data)
                if "error" in event:
                    break
                choices = event.get("choices") or []
                if choices and (choices[0].get("delta") or {}).get("content"):
                    chunks.append(now())
    except Exception as exc:  # noqa: BLE001
        key = type(exc).__name__
        out["errors"][key] = out["errors"].get(key, 0) + 1
        out["fail"] += 1
        return
    done = now()
    if not ok_end or not chunks:
        key = "no [DONE]" if not ok_end else "no content chunk"
        out["errors"][key] = out["errors"].get(key, 0) + 1
        out["fail"] += 1
        return
    out["ok"] += 1
    out["lat_ms"].append(round((done - sent) * 1000, 4))
    out["ttft_ms"].append(round((chunks[0] - sent) * 1000, 4))
    out["gap_ms"].extend(round((b - a) * 1000, 4) for a, b in zip(chunks, chunks[1:], strict=False))
    out["chunks"].append(len(chunks))


async def stream_loop(t: Target, n: int, concurrency: int) -> dict:
    out = {**fresh(n), "ttft_ms": [], "gap_ms": [], "chunks": []}
    left = [n]

    async def caller():
        while left[0] > 0:
            left[0] -= 1
            await one_stream(t, out)

    start = now()
    await asyncio.gather(*(caller() for _ in range(concurrency)))
    out["wall_s"] = now() - start
    return out


async def serve(targets: dict[str, dict]) -> None:
    ts = {name: Target(spec) for name, spec in targets.items()}
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    try:
        while True:
            line = await reader.readline()
            if not line:
                break
            cmd = json.loads(line)
            op = cmd.get("op")
            if op == "quit":
                break
            t = ts[cmd["target"]]
            if op == "open":
                out = await open_loop(t, float(cmd["rate"]), float(cmd["duration"]), bool(cmd.get("record")))
            elif op == "closed":
                out = await closed_loop(t, int(cmd["n"]), int(cmd.get("concurrency", 1)))
            elif op == "stream":
                out = await stream_loop(t, int(cmd["n"]), int(cmd.get("concurrency", 1)))
            else:
                out = {"error": f"unknown op {op!r}"}
            sys.stdout.write(json.dumps(out) + "\n")
            sys.stdout.flush()
    finally:
        for t in ts.values():
            await t.session.close()


class LoadGen:
    """The generator as a child process: ``with LoadGen(targets, path) as lg: lg.run({...})``."""

    def __init__(self, targets: dict, workdir):
        import pathlib

        self.path = pathlib.Path(workdir) / "loadgen-targets.json"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(targets))
        self.proc = None

    def __enter__(self) -> LoadGen:
        import subprocess

        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--targets", str(self.path)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, start_new_session=True,
        )  # fmt: skip
        return self

    def run(self, cmd: dict) -> dict:
        assert self.proc is not None and self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the load generator exited ({self.proc.poll()})")
        return json.loads(line)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def __exit__(self, *exc) -> None:
        import os
        import signal

        if self.proc is None:
            return
        try:
            self.proc.stdin.write(json.dumps({"op": "quit"}) + "\n")
            self.proc.stdin.flush()
            self.proc.wait(10)
        except Exception:  # noqa: BLE001
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(5)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--targets", required=True, help="a JSON file: {name: {url, headers, body}}")
    ap.add_argument("--no-uvloop", action="store_true")
    args = ap.parse_args()
    targets = json.loads(open(args.targets).read())
    if not args.no_uvloop:
        try:
            import uvloop

            uvloop.install()
        except ImportError:
            pass
    asyncio.run(serve(targets))


if __name__ == "__main__":
    main()
