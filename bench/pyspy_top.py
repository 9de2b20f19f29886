"""Summarise py-spy's raw (collapsed-stack) output: the functions with the most samples, inclusive and
self, as percentages of all samples; with --layers, every sample charged to the layer of the request
path it was in (the innermost frame of a known owner: the Redis client, the provider client, the engine,
the call log, the view, Django's ASGI handler, uvicorn, …; samples with no owner frame are the event
loop's or a thread pool's own).

    .venv/bin/python bench/pyspy_top.py var/bench/interactive_latency/pyspy-*.txt [--top 40] [--match TEXT]
    .venv/bin/python bench/pyspy_top.py FILE --layers [--per-call-ms 5.1]   # also ms per call per layer
"""

from __future__ import annotations

import argparse
import collections
import re

# (layer, pattern on a frame's file path), checked from the innermost frame outwards; the first frame
# that matches one names the sample's layer
LAYERS: list[tuple[str, str]] = [
    ("quota store / breaker: Redis client (resp.py)", "gateway_engine/quota/resp.py"),
    ("quota store: bucket/lease/slot logic", "gateway_engine/quota/"),
    ("breaker", "gateway_engine/breaker"),
    (
        "provider HTTP client (engine http.py + aiohttp)",
        "gateway_engine/http.py|gateway_engine/http_stream.py|aiohttp/",
    ),
    ("wire: provider body / answer", "gateway_engine/wire/"),
    (
        "observability (engine observer, metrics, logs)",
        "observability/engine.py|prometheus_client|observability/metrics",
    ),
    ("engine: attempts, admission, recording, other", "gateway_engine/"),
    ("call log + usage write (records.py, ORM, psycopg)", "interactive/records.py"),
    ("auth (key cache)", "interactive/auth.py"),
    ("request check (calls.prepare, validation)", "interactive/calls.py|batches/submission/"),
    ("targets (routing data)", "interactive/targets.py"),
    ("view: answer, outcome, other", "interactive/"),
    (
        "middleware (request id, host, API headers)",
        "observability/logs.py|gateway_site/hosts.py|gateway_site/asgi_routing.py",
    ),
    ("gateway_site.asgi dispatch", "gateway_site/asgi.py"),
    (
        "Django ASGI handler, request/response, signals, asgiref",
        "django/core/handlers/|django/http/|django/dispatch/|asgiref/|django/core/signals|django/db/__init__",
    ),
    ("uvicorn HTTP protocol (httptools)", "uvicorn/protocols/|uvicorn/middleware/|httptools"),
    ("thread pool hand-offs (concurrent.futures, threading)", "concurrent/futures/|threading.py"),
    # the batch path (bench/batch_profile.py): a worker's Django side and what it runs on
    ("PostgreSQL: ORM + psycopg", "django/db/|psycopg/"),
    ("worker: dispatcher, claims, results, finalize (batches/)", "batches/|response_cache/|providers/"),
    ("Celery / kombu / billiard", "celery/|kombu/|billiard/"),
    ("JSON (json, orjson)", "json/|orjson"),
]


def layer_of(frames: list[str]) -> str:
    for frame in reversed(frames):
        m = re.search(r"\((.*?):\d+\)", frame)
        path = m.group(1) if m else frame
        for name, pattern in LAYERS:
            if re.search(pattern, path):
                return name
    return "event loop itself (asyncio / uvloop, no owner frame)"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--match", default="", help="only frames containing this text (inclusive list)")
    ap.add_argument("--layers", action="store_true", help="samples per layer of the request path")
    ap.add_argument(
        "--per-call-ms", type=float, default=None, help="CPU ms per call, to show each layer in ms"
    )
    args = ap.parse_args(argv)
    total, incl, own, layers = 0, collections.Counter(), collections.Counter(), collections.Counter()
    for path in args.files:
        for line in open(path):
            stack, _, n = line.rstrip().rpartition(" ")
            if not n.isdigit():
                continue
            frames = stack.split(";")
            total += int(n)
            own[frames[-1]] += int(n)
            layers[layer_of(frames)] += int(n)
            for f in set(frames):
                incl[f] += int(n)
    print(f"{total} samples")
    if args.layers:
        for name, n in layers.most_common():
            ms = f"  {args.per_call_ms * n / total:5.2f} ms/call" if args.per_call_ms else ""
            print(f"  {100 * n / total:5.1f}%{ms}  {name}")
        return 0
    print("inclusive:")
    for f, n in incl.most_common():
        if args.match in f:
            print(f"  {100 * n / total:5.1f}%  {f}")
            args.top -= 1
            if args.top <= 0:
                break
    print("self:")
    for f, n in own.most_common(25):
        print(f"  {100 * n / total:5.1f}%  {f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
