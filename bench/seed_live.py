"""The seed's scenario as live traffic (issue #22): --users user requests at once, each needing three
answers (intent from alpha, sentiment from beta, summary from local: docs/seed.md §4) asked at the
same time through the gateway's /v1/chat/completions (model = the route).

    .venv/bin/python bench/seed_live.py                          # writes docs/benchmarks.md
    .venv/bin/python bench/seed_live.py --users 50 --time-scale 10 --no-write

The providers: examples/sim.json's (latency, rpm, tpm, concurrency; time-compressed by --time-scale,
10 = the file's own; error_rate_500 dropped unless --errors), configured in the gateway the way
bench/seed_workload.py does (real rates, burst_seconds 1). The gateway: `uvicorn
gateway_site.asgi:application` (1 process), PostgreSQL + Redis. The calls: the openai SDK's
AsyncOpenAI (max_retries=0, so a refusal is counted, not hidden) from this process.

Per user request, from the simulator's trace (each call is tagged [u17]):
- latency: its three calls sent → the last of its three answers back (at the caller)
- floor: the longest of its three provider service times (trace done − arrival): the latency the user
  would see if every provider took the call at once; a single call's floor is its own service time
- added: latency − floor (the quota wait behind the other users' calls and the gateway's overhead)
- quota floor per user: the user whose answers came back k-th cannot have been admitted before the k-th
  token of every provider's bucket (the simulator's: capacity rpm/60 × burst_seconds, refill rpm/60 per
  simulated second) — max over providers of max(0, (k − capacity) / rate) — plus its floor
and for the whole set, the quota floor t_min (bench.common.quota_floor): the soonest the last user
could be done under the providers' limits.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (  # noqa: E402
    ROOT,
    ROUTES,
    SHARED_MACHINE,
    add_output_args,
    bench_sim_config,
    command_line,
    fmt_s,
    gateway_providers,
    pct,
    quota_floor,
    report_header,
    run_meta,
    save_and_publish,
    seed_items,
    user_messages,
)
from bench.interactive_stack import (  # noqa: E402
    InteractiveStack,
    add_publish_args,
    load_published,
    publish,
    uvicorn_command,
)
from bench.stack import exit_cleanly_on_sigterm  # noqa: E402
from sim.testing import run_simulator_subprocess  # noqa: E402


async def one_user(client, i: int, text: str, t0: float) -> dict:
    async def call(route: str):
        _provider, max_tokens, instruction = ROUTES[route]
        s = time.perf_counter()
        try:
            r = await client.chat.completions.create(
                model=route, max_tokens=max_tokens,
                messages=[{"role": "user", "content": f"{instruction}\n\n{text}"}],
            )  # fmt: skip
            ok = bool(r.choices and r.choices[0].message.content is not None)
            err = None
        except Exception as exc:  # noqa: BLE001 - counted
            ok, err = False, f"{type(exc).__name__}: {getattr(exc, 'status_code', '')}"
        return route, ok, err, time.perf_counter() - s

    start = time.perf_counter()
    calls = await asyncio.gather(*(call(r) for r in ROUTES))
    done = time.perf_counter()
    return {
        "user": f"u{i}", "ok": all(c[1] for c in calls), "errors": [c[2] for c in calls if c[2]],
        "latency": done - start, "done_at": done - t0, "calls": {c[0]: c[3] for c in calls},
    }  # fmt: skip


async def drive(base_url: str, key: str, users: int) -> tuple[list[dict], float]:
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=base_url, api_key=key, max_retries=0, timeout=120)
    try:
        await client.models.list()  # one warm connection and a warm key cache
        texts = user_messages(users)
        t0 = time.perf_counter()
        out = await asyncio.gather(*(one_user(client, i, t, t0) for i, t in enumerate(texts, start=1)))
        return list(out), time.perf_counter() - t0
    finally:
        await client.close()


def slot_floor(sim_cfg: dict, rank: int) -> float:
    """The earliest the rank-th request (from 1) of a burst can be admitted by every provider's bucket:
    max over providers of max(0, (rank − capacity) / rate), real seconds (the simulator's buckets)."""
    scale, worst = sim_cfg["time_scale"], 0.0
    for p in sim_cfg["providers"].values():
        cap = max(1.0, p["rpm"] / 60 * p.get("burst_seconds", 5.0))
        worst = max(worst, max(0.0, (rank - cap) / (p["rpm"] * scale / 60)))
    return worst


def analyse(users: list[dict], trace: list[dict], sim_cfg: dict) -> dict:
    service: dict[str, list[float]] = {}
    for r in trace:
        if r["tag"] and r["status"] == 200:
            service.setdefault(r["tag"], []).append(r["done_s"] - r["arrival_s"])
    lat, floor, added = [], [], []
    for u in users:
        s = service.get(u["user"], [])
        if not u["ok"] or len(s) < 3:
            continue
        lat.append(u["latency"])
        floor.append(max(s))
        added.append(u["latency"] - max(s))
    # the quota floor per user: the user whose answers came back rank-th cannot be served before the
    # rank-th bucket slot of every provider, plus its own slowest service time
    done = sorted(
        (u for u in users if u["ok"] and len(service.get(u["user"], [])) >= 3), key=lambda u: u["latency"]
    )
    qfloor = [slot_floor(sim_cfg, k) + max(service[u["user"]]) for k, u in enumerate(done, start=1)]
    return {
        "qfloor_p50": pct(qfloor, 0.5), "qfloor_p95": pct(qfloor, 0.95), "qfloor_max": max(qfloor, default=None),
        "users_ok": len(lat), "lat_p50": pct(lat, 0.5), "lat_p95": pct(lat, 0.95), "lat_max": max(lat, default=None),
        "floor_p50": pct(floor, 0.5), "floor_p95": pct(floor, 0.95), "floor_max": max(floor, default=None),
        "added_p50": pct(added, 0.5), "added_p95": pct(added, 0.95), "added_max": max(added, default=None),
    }  # fmt: skip


def per_route(users: list[dict], trace: list[dict]) -> dict:
    """Per route: the callers' call latency vs the provider's service time (p50), seconds."""
    by_provider: dict[str, list[float]] = {}
    for r in trace:
        if r["tag"] and r["status"] == 200:
            by_provider.setdefault(r["provider"], []).append(r["done_s"] - r["arrival_s"])
    out = {}
    for route, (provider, _m, _i) in ROUTES.items():
        calls = [u["calls"][route] for u in users if route in u["calls"]]
        out[route] = {"provider": provider, "call_p50": pct(calls, 0.5), "call_max": max(calls, default=None),
                      "service_p50": pct(by_provider.get(provider, []), 0.5)}  # fmt: skip
    return out


def render(res: dict, meta: dict, args) -> str:
    a, ts = res["analysis"], args.time_scale
    lines = report_header("Seed scenario as live traffic: 50 user requests × 3 models (issue #22)", meta,
                          SHARED_MACHINE)  # fmt: skip
    lines += [
        f"- {args.users} user requests at once, each three calls at once (intent → alpha, sentiment → beta, "
        "summary → local) through `/v1/chat/completions` (openai SDK AsyncOpenAI, max_retries=0), from the "
        "bench process",
        f"- providers: examples/sim.json at time_scale {ts:g} ({'with' if args.errors else 'without'} its 1 % "
        "500s): medians alpha 2.1 s, beta 1.8 s, local 0.9 s simulated; rpm 60 / 30 / 200, max_concurrency "
        "6 / 3 / 20; the gateway has the real rates (× time_scale), burst_seconds 1",
        f"- gateway: `{meta['uvicorn']}` (1 process), PostgreSQL + Redis, no Celery worker",
        f"- quota floor for the whole set (bench.common.quota_floor): t_min = {res['t_min']:.2f} s real "
        f"({res['t_min'] * ts:.0f} s simulated), binding: {res['binding']}",
        "",
        "| | p50 (s) | p95 (s) | max (s) |",
        "|---|---|---|---|",
        f"| user latency (3 answers back) | {fmt_s(a['lat_p50'])} | {fmt_s(a['lat_p95'])} | {fmt_s(a['lat_max'])} |",
        f"| floor: slowest of its 3 provider service times | {fmt_s(a['floor_p50'])} | {fmt_s(a['floor_p95'])} | "
        f"{fmt_s(a['floor_max'])} |",
        f"| added: latency − floor | {fmt_s(a['added_p50'])} | {fmt_s(a['added_p95'])} | {fmt_s(a['added_max'])} |",
        f"| quota floor per user: k-th user back ≥ k-th bucket slot of every provider + its floor | "
        f"{fmt_s(a['qfloor_p50'])} | {fmt_s(a['qfloor_p95'])} | {fmt_s(a['qfloor_max'])} |",
        "",
        f"- users with all three answers: {a['users_ok']} / {args.users}; last user done after "
        f"{res['wall_s']:.2f} s real ({res['wall_s'] * ts:.0f} s simulated) against t_min {res['t_min']:.2f} s; "
        f"errors at the callers: {res['errors'] or 'none'}; at the providers: {res['sim_requests']} requests, "
        f"{res['sim_429']} 429s, {res['sim_5xx']} 5xx",
        "- per route, call latency at the caller p50 / max vs the provider's service time p50 (s): "
        + "; ".join(
            f"{route} ({d['provider']}) {fmt_s(d['call_p50'])} / {fmt_s(d['call_max'])} vs {fmt_s(d['service_p50'])}"
            for route, d in res["routes"].items()
        ),
        f"- in simulated time (× {ts:g}): user latency p50 {fmt_s((a['lat_p50'] or 0) * ts, 1)} s, p95 "
        f"{fmt_s((a['lat_p95'] or 0) * ts, 1)} s, all {args.users} done in {res['wall_s'] * ts / 60:.1f} simulated "
        "minutes (the seed's author, §4.1: ~4.2 s per request, 50 requests in 7 minutes)",
    ]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--users", type=int, default=50)
    ap.add_argument("--time-scale", type=float, default=10.0)
    ap.add_argument("--errors", action="store_true", help="keep examples/sim.json's error_rate_500")
    ap.add_argument("--json", default=None)
    add_output_args(ap)
    add_publish_args(ap)
    args = ap.parse_args(argv)
    if args.publish:
        meta, saved, run_args = load_published(ap, args.publish)
        publish(render(saved[0], meta, run_args), args, "interactive-seed-live")
        return 0
    exit_cleanly_on_sigterm()
    logdir = ROOT / "var" / "bench" / "seed_live"
    logdir.mkdir(parents=True, exist_ok=True)
    sim_cfg = bench_sim_config(args.time_scale, errors=args.errors)
    floor = quota_floor(sim_cfg, seed_items(args.users))
    with run_simulator_subprocess(sim_cfg, log_path=logdir / "sim.log") as sim:
        with InteractiveStack(gateway_providers(sim_cfg, sim.base_url), logdir) as gw:
            sim.reset()
            users, wall = asyncio.run(drive(f"{gw.asgi_url}/v1", gw.key, args.users))
            trace = sim.trace()
            counters = sim.counters()["totals"]
    errors: dict[str, int] = {}
    for u in users:
        for e in u["errors"]:
            errors[e] = errors.get(e, 0) + 1
    res = {
        "analysis": analyse(users, trace, sim_cfg), "routes": per_route(users, trace), "wall_s": wall,
        "t_min": floor["t_min"],
        "binding": ", ".join(f"{n} {p['binding']}" for n, p in floor["providers"].items()),
        "errors": errors, "sim_requests": counters["requests"], "sim_429": counters["rate_limited_429"],
        "sim_5xx": counters["status_5xx"], "users": users,
    }  # fmt: skip
    meta = run_meta(command_line("bench/seed_live.py", argv), uvicorn=uvicorn_command(1))
    text = render(res, meta, args)
    print(text)
    path = Path(args.json) if args.json else logdir / "seed_live.json"
    save_and_publish(path, meta, [res], args, args.marker or "interactive-seed-live", text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
