"""docs/seed.md §4 comparison in one run: the same workload and simulator for every approach.

    .venv/bin/python bench/seed_workload.py                 # all six rows, writes docs/benchmarks.md
    .venv/bin/python bench/seed_workload.py --rows 1,2,3    # some rows (the table keeps the others)
    .venv/bin/python bench/seed_workload.py --rows 7,5,6 --teams 2 --no-write --json var/bench/x.json

Workload: --users user messages (default 300), each needing intent (alpha), sentiment (beta) and
summary (local). Simulator: examples/sim.json's providers at --time-scale (default 10x, as in
examples/sim.json), so beta's 30 rpm (300 real rpm at 10x) is the binding quota. Rows:
  1 serial loop, official openai SDK          2 asyncio.gather, openai SDK default retries
  3 LangChain abatch + InMemoryRateLimiter    4 gateway, single process (SQLite, eager Celery)
  5 gateway, Redis + PostgreSQL, 2 workers    6 same with 4 workers    7 same with 1 worker

Celery workers are started the standard way (`celery -A gateway_site worker`: the default prefork pool,
one child per CPU) unless --worker-concurrency / --worker-pool say otherwise (`--worker-concurrency 1`:
the setting of the figures before issue #19). --teams 2: the gateway rows split the users between two
teams (odd users team 1, even users team 2) whose batches are POSTed at the same moment; the floor is the
same (the same 900 calls). Every gateway row reports what the providers saw per custom id (the
simulator's request counts): requests beyond one per id, against the retries and requests the batches'
stats counted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (  # noqa: E402
    ROOT,
    ROUTES,
    bench_sim_config,
    burst_report,
    command_line,
    fmt_provider_requests,
    fmt_s,
    gateway_providers,
    item_user,
    load_average,
    provider_requests,
    quota_floor,
    replace_section,
    report_header,
    run_meta,
    save_and_publish,
    seed_items,
    sim_summary,
    user_latencies_from_trace,
    utc_now,
    with_kinds,
)
from bench.stack import add_worker_args  # noqa: E402
from sim.testing import SimHandle, run_simulator_subprocess  # noqa: E402

ROW_NAMES = {
    1: "serial loop (openai SDK)",
    2: "asyncio.gather (openai SDK, default retries)",
    3: "LangChain abatch + InMemoryRateLimiter",
    4: "gateway, single process (SQLite, eager Celery)",
    5: "gateway, Redis + PostgreSQL, 2 Celery workers",
    6: "gateway, Redis + PostgreSQL, 4 Celery workers",
    7: "gateway, Redis + PostgreSQL, 1 Celery worker",
}
API_KEY = "sk-bench-not-a-real-key"


@dataclass
class Ctx:
    sim: SimHandle
    sim_cfg: dict
    items: list[dict]
    logdir: Path
    teams: int = 1
    worker_concurrency: int | None = None
    worker_pool: str | None = None


@dataclass
class RowResult:
    items_ok: int
    wall: float
    notes: list[str] = field(default_factory=list)
    name: str | None = None  # the row's label when it says more than ROW_NAMES (pool, teams)
    extra: dict = field(default_factory=dict)  # more fields for the saved row


def provider_of(item: dict) -> str:
    return ROUTES[item["route"]][0]


def model_of(ctx: Ctx, provider: str) -> str:
    return ctx.sim_cfg["providers"][provider].get("model", provider)


# --- row 1: serial ------------------------------------------------------------------------------------


def row_serial(ctx: Ctx) -> RowResult:
    from openai import OpenAI

    clients = {p: OpenAI(base_url=ctx.sim.provider_url(p), api_key=API_KEY) for p in ctx.sim_cfg["providers"]}
    ok = 0
    t0 = time.monotonic()
    for it in ctx.items:
        p = provider_of(it)
        try:
            clients[p].chat.completions.create(
                model=model_of(ctx, p), messages=[{"role": "user", "content": it["query"]}], **it["params"]
            )
            ok += 1
        except Exception:  # noqa: BLE001 - a failed item is counted, not fatal
            pass
    wall = time.monotonic() - t0
    for c in clients.values():
        c.close()
    return RowResult(ok, wall)


# --- row 2: naive gather -----------------------------------------------------------------------------


def row_gather(ctx: Ctx) -> RowResult:
    from openai import AsyncOpenAI

    async def main():
        clients = {
            p: AsyncOpenAI(base_url=ctx.sim.provider_url(p), api_key=API_KEY)
            for p in ctx.sim_cfg["providers"]
        }

        async def one(it):
            p = provider_of(it)
            try:
                await clients[p].chat.completions.create(
                    model=model_of(ctx, p),
                    messages=[{"role": "user", "content": it["query"]}],
                    **it["params"],
                )
                return True
            except Exception:  # noqa: BLE001
                return False

        t0 = time.monotonic()
        oks = await asyncio.gather(*(one(it) for it in ctx.items))
        wall = time.monotonic() - t0
        for c in clients.values():
            await c.close()
        return sum(oks), wall

    ok, wall = asyncio.run(main())
    return RowResult(ok, wall)


# --- row 3: LangChain ---------------------------------------------------------------------------------


def row_langchain(ctx: Ctx) -> RowResult:
    from langchain_core.rate_limiters import InMemoryRateLimiter
    from langchain_openai import ChatOpenAI

    scale = ctx.sim_cfg["time_scale"]
    by_route: dict[str, list[dict]] = {}
    for it in ctx.items:
        by_route.setdefault(it["route"], []).append(it)

    async def main():
        async def run_route(route: str, items: list[dict]):
            provider, max_tokens, _ = ROUTES[route]
            p = ctx.sim_cfg["providers"][provider]
            limiter = InMemoryRateLimiter(
                requests_per_second=p["rpm"] * scale / 60, check_every_n_seconds=0.01, max_bucket_size=1
            )
            llm = ChatOpenAI(
                model=model_of(ctx, provider),
                openai_api_base=ctx.sim.provider_url(provider),
                openai_api_key=API_KEY,
                max_tokens=max_tokens,
                rate_limiter=limiter,
            )
            inputs = [[("user", it["query"])] for it in items]
            out = await llm.abatch(
                inputs, config={"max_concurrency": p["max_concurrency"]}, return_exceptions=True
            )
            return sum(1 for r in out if not isinstance(r, BaseException))

        t0 = time.monotonic()
        counts = await asyncio.gather(*(run_route(r, its) for r, its in by_route.items()))
        return sum(counts), time.monotonic() - t0

    ok, wall = asyncio.run(main())
    return RowResult(
        ok,
        wall,
        ["one ChatOpenAI per provider, rate = the provider's real rpm, max_concurrency = its ceiling"],
    )


# --- rows 4-6: the gateway ----------------------------------------------------------------------------


def split_teams(items: list[dict], teams: int) -> list[list[dict]]:
    """The items of user i go to team (i - 1) % teams: every team gets all three calls of its users."""
    out: list[list[dict]] = [[] for _ in range(teams)]
    for it in items:
        out[(int(item_user(it["custom_id"])[1:]) - 1) % teams].append(it)
    return out


def gateway_row(ctx: Ctx, mode: str, workers: int = 0) -> RowResult:
    from bench.stack import GatewayStack

    providers = gateway_providers(ctx.sim_cfg, ctx.sim.base_url)
    teams = ctx.teams if mode == "shared" else 1
    logdir = ctx.logdir / (f"gateway-{mode}-{workers}" if workers else f"gateway-{mode}")
    with GatewayStack(
        mode, providers, logdir, workers=workers, worker_concurrency=ctx.worker_concurrency,
        worker_pool=ctx.worker_pool,
    ) as gw:  # fmt: skip
        heads = [gw.headers] + [gw.add_team(f"bench{t + 1}") for t in range(1, teams)]
        ctx.sim.reset()  # the simulator clock and counters start with the submission
        if teams == 1:
            batch, wall = gw.run_batch(ctx.items)
            batches = [batch]
        else:
            batches, wall = gw.run_batches(list(zip(heads, split_teams(ctx.items, teams), strict=True)))
        sent = provider_requests(ctx.sim.request_counts(), batches)
        ok = sum(int((b.get("stats") or {}).get("success_count") or 0) for b in batches)
        notes = [
            ", ".join(
                f"batch status {b['status']}, stats.success_count={(b.get('stats') or {}).get('success_count')}"
                for b in batches
            )
        ]
        notes.append(burst_report(ctx.sim.trace(), ctx.sim_cfg, providers))
        notes.append(f"gateway retries {sent['gateway_retries']}")
        name = ROW_NAMES[ROW_OF_WORKERS.get(workers, 4)]
        notes.append(fmt_provider_requests(sent))
        if mode == "shared":
            name += f" ({gw.pool_label})"
        if teams > 1:
            name += f", {teams} teams at once"
        return RowResult(ok, wall, notes, name=name, extra={"provider_requests": sent, "teams": teams})


def row_gateway_single(ctx: Ctx) -> RowResult:
    return gateway_row(ctx, "single")


def row_gateway_2(ctx: Ctx) -> RowResult:
    return gateway_row(ctx, "shared", 2)


def row_gateway_4(ctx: Ctx) -> RowResult:
    return gateway_row(ctx, "shared", 4)


def row_gateway_1(ctx: Ctx) -> RowResult:
    return gateway_row(ctx, "shared", 1)


ROWS = {
    1: row_serial,
    2: row_gather,
    3: row_langchain,
    4: row_gateway_single,
    5: row_gateway_2,
    6: row_gateway_4,
    7: row_gateway_1,
}
GATEWAY_ROWS = {4, 5, 6, 7}
ROW_OF_WORKERS = {1: 7, 2: 5, 4: 6}


# --- driver -------------------------------------------------------------------------------------------


def run_row(n: int, ctx: Ctx, t_min: float) -> dict:
    print(f"row {n}: {ROW_NAMES[n]} ...", flush=True)
    ctx.sim.reset()
    res = ROWS[n](ctx)
    counters = ctx.sim.counters()
    trace = ctx.sim.trace()
    (ctx.logdir / f"trace-row{n}.json").write_text(json.dumps(trace))
    s = sim_summary(counters)
    lat = user_latencies_from_trace(trace)
    users_total = len({item_user(it["custom_id"]) for it in ctx.items})
    row = {
        "row": n,
        "name": res.name or ROW_NAMES[n],
        "items": len(ctx.items),
        "items_ok": res.items_ok,
        "wall_s": res.wall,
        "t_min_s": t_min,
        # efficiency only means something when every item made it
        "efficiency": t_min / res.wall if res.wall and res.items_ok == len(ctx.items) else None,
        "users_complete": lat["users_complete"],
        "users_total": users_total,
        "service_p50": lat["service_p50"],
        "service_p95": lat["service_p95"],
        "done_p50": lat["done_p50"],
        "done_p95": lat["done_p95"],
        "sim_requests": s["requests"],
        "sim_429": s["429s"],
        "sim_5xx": s["5xx"],
        "billed": s["billed"],
        "delivered": s["delivered"],
        "waste_pct": s["waste_pct"],
        "max_in_flight": s["max_in_flight"],
        "per_provider": {
            name: {
                k: c[k]
                for k in (
                    "requests",
                    "ok",
                    "rate_limited_429",
                    "overload_503",
                    "errors_500",
                    "max_accepted_per_minute",
                    "billed_tokens",
                    "delivered_tokens",
                )
            }
            for name, c in counters["providers"].items()
        },  # fmt: skip
        "max_per_minute": s["max_per_minute"],
        "notes": res.notes,
        "run_at": utc_now(),
        "loadavg": load_average(),
        **res.extra,
    }
    print(
        f"   ok {row['items_ok']}/{row['items']}  wall {row['wall_s']:.1f}s  eff {fmt_s(row['efficiency'])}  "
        f"429s {row['sim_429']}  5xx {row['sim_5xx']}  waste {row['waste_pct']:.1f}%  "
        f"service p50 {fmt_s(row['service_p50'])}s  load {row['loadavg']}"
        + (f"  dup {row['provider_requests']['duplicates']}" if row.get("provider_requests") else ""),
        flush=True,
    )
    return row


def dup_cell(r: dict) -> str:
    """Requests beyond one per custom id (of them, the gateway's retries), for the gateway's shared rows."""
    d = r.get("provider_requests")
    if not d or r["row"] not in GATEWAY_ROWS:
        return "–"
    return f"{d['duplicates']} ({d['gateway_retries']} retries)"


def render(rows: list[dict], meta: dict) -> str:
    scale = meta["time_scale"]
    lines = [
        *report_header("Seed workload: serial vs gather vs LangChain vs the gateway", meta),
        f"- workload: {meta['users']} user messages x intent (alpha) / sentiment (beta) / summary (local) = "
        f"{meta['items']} calls; simulator: examples/sim.json providers at time_scale {scale:g} "
        f"(1 simulated minute = {60 / scale:g} real s; provider buckets hold 1.3 real s), "
        f"error_rate_500 as in examples/sim.json",
        *(
            [f"- provider kinds (issue #21): {', '.join(f'{n} {k}' for n, k in meta['kinds'].items())}"]
            if meta.get("kinds")
            else []
        ),
        f"- quota floor t_min = {meta['t_min']:.2f} s real, binding: "
        + ", ".join(
            f"{name} {v['binding']} ({v['n']} calls, {v['floor_s']:.2f} s)"
            for name, v in meta["floor"].items()
        ),
        "",
        "| # | approach | items ok | wall (s) | t_min (s) | efficiency t_min/wall | user latency p50 / p95 (s) "
        "| users done p50 (s) | 429s at provider | 5xx at provider | waste % | provider requests beyond one per id |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r.get("skipped"):
            lines.append(f"| {r['row']} | {r['name']} | not run: {r['skipped']} | | | | | | | | | |")
            continue
        lines.append(
            f"| {r['row']} | {r['name']} | {r['items_ok']}/{r['items']} | {r['wall_s']:.1f} | {r['t_min_s']:.1f} "
            f"| {fmt_s(r['efficiency']) if r['efficiency'] is not None else 'n/a (items failed)'} "
            f"| {fmt_s(r['service_p50'])} / {fmt_s(r['service_p95'])} "
            f"| {fmt_s(r['done_p50'], 1)} | {r['sim_429']} | {r['sim_5xx']} | {r['waste_pct']:.1f} "
            f"| {dup_cell(r)} |"
        )
    lines += [
        "",
        "Columns: *user latency* is per user request, measured at the simulator: from the first of its three "
        "calls reaching a provider (including rejected attempts) to the last of its three answers leaving it "
        "(real seconds; multiply by the time scale for simulated seconds); users whose three calls did not all "
        "succeed are left out. *users done* is when a user's last answer left, counted from the start of the run "
        "(all requests are present at t=0). *429s / 5xx* are what the simulated providers answered. *waste %* = "
        "(billed − delivered tokens) / billed: the simulator bills accepted requests (500-after-processing "
        "and abandoned ones included) and does not bill 429 or 503 rejections, like real providers. "
        "*provider requests beyond one per id*: from the simulator's per-X-Request-ID counts (the gateway sends "
        "the item's custom_id), sum of max(0, n − 1) over the custom ids; retries after a 429/5xx are in it, "
        "the gateway's own retry count in brackets (gateway rows only).",
        "",
    ]
    notes = [f"- row {r['row']}: " + "; ".join(r["notes"]) for r in rows if r.get("notes")]
    commands = sorted({r.get("command") for r in rows if r.get("command")})
    if len(commands) > 1:  # rows merged from separate invocations
        notes += [
            f"- rows {', '.join(str(r['row']) for r in rows if r.get('command') == cmd)} "
            f"(run {min(r.get('run_at', '') for r in rows if r.get('command') == cmd)}): `{cmd}`"
            for cmd in commands
        ]
    if notes:
        lines += ["Notes:", *notes, ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", default="1,2,3,4,5,6")
    ap.add_argument("--users", type=int, default=300)
    ap.add_argument("--time-scale", type=float, default=10.0)
    ap.add_argument("--no-errors", action="store_true", help="drop error_rate_500 from the providers")
    ap.add_argument("--out", default=str(ROOT / "docs" / "benchmarks.md"))
    ap.add_argument("--json", default=str(ROOT / "var" / "bench" / "seed_workload.json"))
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--render-only", action="store_true", help="rewrite the docs section from --json")
    ap.add_argument("--teams", type=int, default=1, help="gateway rows: split the users between N teams")
    ap.add_argument(
        "--kinds",
        default="",
        help="gateway rows only: the three providers' kinds, e.g. openai,anthropic,gemini (issue #21); "
        "written to the docs section seed-workload-kinds",
    )
    add_worker_args(ap)
    args = ap.parse_args(argv)
    from bench.stack import exit_cleanly_on_sigterm

    exit_cleanly_on_sigterm()

    if args.render_only:
        saved = json.loads(Path(args.json).read_text())
        replace_section(Path(args.out), "seed-workload", render(saved["rows"], saved["meta"]))
        print(f"wrote {args.out} from {args.json}")
        return 0
    rows_wanted = [int(x) for x in args.rows.split(",") if x.strip()]
    sim_cfg = bench_sim_config(args.time_scale, errors=not args.no_errors)
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    section = "seed-workload"
    if kinds:
        if set(rows_wanted) - GATEWAY_ROWS:
            raise SystemExit("--kinds: the direct rows (1-3) speak OpenAI only; choose rows from 4-7")
        sim_cfg = with_kinds(sim_cfg, kinds)
        section = "seed-workload-kinds"
        args.json = args.json.replace("seed_workload.json", "seed_workload_kinds.json")
    items = seed_items(args.users)
    floor = quota_floor(sim_cfg, items)
    logdir = ROOT / "var" / "bench"
    logdir.mkdir(parents=True, exist_ok=True)
    json_path = Path(args.json)
    previous = {}
    if json_path.exists():
        try:
            saved = json.loads(json_path.read_text())
            m = saved.get("meta", {})
            if (
                m.get("users") == args.users
                and m.get("time_scale") == args.time_scale
                and m.get("teams", 1) == args.teams
                and m.get("worker_concurrency") == args.worker_concurrency
                and m.get("worker_pool") == args.worker_pool
            ):
                previous = {r["row"]: r for r in saved["rows"]}
        except (ValueError, KeyError):
            previous = {}

    print(
        f"t_min = {floor['t_min']:.2f} s ({json.dumps({k: round(v['floor_s'], 2) for k, v in floor['providers'].items()})})"
    )
    results = dict(previous)
    command = command_line("bench/seed_workload.py", argv)
    with run_simulator_subprocess(sim_cfg, log_path=logdir / "sim.log") as sim:
        ctx = Ctx(sim, sim_cfg, items, logdir, args.teams, args.worker_concurrency, args.worker_pool)
        for n in rows_wanted:
            try:
                results[n] = run_row(n, ctx, floor["t_min"])
                results[n]["command"] = command
            except Exception as exc:  # noqa: BLE001 - one row failing must not lose the others
                print(f"   row {n} failed: {exc!r}", flush=True)
                results[n] = {"row": n, "name": ROW_NAMES[n], "skipped": f"{type(exc).__name__}: {exc}"[:200]}

    meta = run_meta(
        command,
        users=args.users,
        items=len(items),
        time_scale=args.time_scale,
        t_min=floor["t_min"],
        floor=floor["providers"],
        teams=args.teams,
        worker_concurrency=args.worker_concurrency,
        worker_pool=args.worker_pool,
        kinds=dict(zip(sim_cfg["providers"], kinds, strict=True)) if kinds else None,
    )
    ordered = [results[k] for k in sorted(results)]
    save_and_publish(json_path, meta, ordered, args, section, render(ordered, meta))
    return 0


if __name__ == "__main__":
    sys.exit(main())
