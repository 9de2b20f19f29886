"""Fair, provider-aware scheduling (issue #10): how long a second team's batch takes behind a big one.

    .venv/bin/python bench/fairness.py            # all scenarios, writes docs/benchmarks.md ("Fairness")

Production-shaped stack (bench.stack.GatewayStack "shared": gunicorn + 2 × `celery -A gateway_site
worker` with Celery's default prefork pool and concurrency unless --worker-concurrency / --worker-pool
say otherwise; GATEWAY_DISPATCHERS = the workers' pool children in all; PostgreSQL + Redis) against the simulator (no limits of its own; the gateway's buckets shape
traffic). Each scenario posts team A's big batch, waits until A's provider is busy, posts team B's
batch, and measures B's completion (B's created_at → completed_at) and B's share of the provider's
accepted requests while both were backlogged (B's 10th..(n-10)th accepted request, from the trace).
Then A is cancelled.

  head-of-line  A: 2,000 items on a 600 rpm provider; B: 50 items on an idle 6,000 rpm provider
                goal: B ≤ 5 s (floor: 50 requests at 6,000 rpm with a 1 s burst ≈ 0.05 s)
  fair-1        A: 1,500 then B: 150 on one 1,200 rpm provider, equal weights
                fair: B gets half → 150 / 10 per s = 15 s; goal ≤ 1.5 × fair
  fair-3        same, B's Team.weight = 3: fair 150 / 15 per s = 10 s
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import secrets
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import ROOT, git_rev, load_average, machine, replace_section  # noqa: E402
from bench.stack import GatewayStack, add_worker_args  # noqa: E402
from sim.testing import run_simulator_in_thread  # noqa: E402

PROVIDERS = {  # name: rpm
    "slowp": 600,
    "fastp": 6000,
    "shared1": 1200,
    "shared3": 1200,
}
SCENARIOS = [
    # name, A's provider, A items, B's provider, B items, B weight, fair seconds, goal seconds
    ("head-of-line", "slowp", 2000, "fastp", 50, 1, 0.05, 5.0),
    ("fair-1", "shared1", 1500, "shared1", 150, 1, 15.0, 22.5),
    ("fair-3", "shared3", 1500, "shared3", 150, 3, 10.0, 15.0),
]
BEFORE = {"head-of-line": "173 s (issue #10)", "fair-1": "70 s (issue #10)", "fair-3": "–"}


def sim_config() -> dict:
    return {
        "seed": 3,
        "trace_tag_regex": "^([A-Z]):",
        "providers": {
            name: {"median_ms": 50, "sigma": 0.2, "completion_tokens": {"median": 4, "sigma": 0}}
            for name in PROVIDERS
        },
    }


def provider_file(sim) -> dict:
    return {
        "providers": [
            {"name": name, "base_url": sim.provider_url(name), "model": name, "rpm": rpm, "tpm": 10_000_000,
             "max_concurrency": 20, "burst_seconds": 1, "timeout_seconds": 30, "max_retries": 3}
            for name, rpm in PROVIDERS.items()
        ],
        "routes": [],
    }  # fmt: skip


def items(prefix: str, provider: str, n: int) -> list[dict]:
    return [
        {
            "custom_id": f"{prefix}{i:05d}",
            "provider": provider,
            "query": f"{prefix}:{i}",
            "params": {"max_tokens": 4},
        }
        for i in range(n)
    ]


def iso(s: str) -> float:
    return dt.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


class Team:
    def __init__(self, gw: GatewayStack, name: str, weight: int = 1):
        gw.manage("create_team", name, env=gw._env)
        code = f"from teams.models import Team; Team.objects.filter(name={name!r}).update(weight={weight})"
        gw.manage("shell", "-c", code, env=gw._env)
        out = gw.manage("create_api_key", "--team", name, "--name", "bench", env=gw._env)
        self.gw, self.headers = gw, {"Authorization": f"Bearer {out.strip().splitlines()[-1]}"}

    def post(self, path: str, **kw) -> dict:
        r = self.gw.http.post(f"{self.gw.url}{path}", headers=self.headers, timeout=120, **kw)
        r.raise_for_status()
        return r.json()

    def get(self, batch_id: str) -> dict:
        return self.gw.http.get(
            f"{self.gw.url}/api/v1/batches/{batch_id}", headers=self.headers, timeout=30
        ).json()

    def wait(self, batch_id: str, timeout: float = 300) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            b = self.get(batch_id)
            if b["completed_at"]:
                return b
            time.sleep(0.2)
        raise RuntimeError(f"batch {batch_id} did not finish in {timeout} s")


def run(gw: GatewayStack, sim, scenario) -> dict:
    name, pa, na, pb, nb, weight, fair, goal = scenario
    tag = secrets.token_hex(2)
    a_team, b_team = Team(gw, f"a-{name}-{tag}"), Team(gw, f"b-{name}-{tag}", weight)
    a = a_team.post("/api/v1/batches", json={"items": items("A", pa, na)})
    while sim.provider_counters(pa)["accepted"] < 50:
        time.sleep(0.1)
    a_before = sim.provider_counters(pa)["accepted"]
    b = b_team.post("/api/v1/batches", json={"items": items("B", pb, nb)})
    b = b_team.wait(b["id"])
    a_team.post(f"/api/v1/batches/{a['id']}/cancel")
    a_team.wait(a["id"])
    rows = sorted((r for r in sim.trace() if r["status"] == 200), key=lambda r: r["arrival_s"])
    b_rows = [r for r in rows if r["provider"] == pb and r["tag"] == "B"]
    b_last = b_rows[-1]["arrival_s"]
    a_meanwhile = sum(1 for r in rows if r["provider"] == pa and r["tag"] == "A" and r["arrival_s"] <= b_last)
    share = None
    if pa == pb:
        idx = [i for i, r in enumerate(rows) if r["provider"] == pb and r["tag"] == "B"]
        window = [r for r in rows[idx[10] : idx[-10] + 1] if r["provider"] == pb]
        share = sum(1 for r in window if r["tag"] == "B") / len(window)
    sim.reset()
    return {
        "name": name,
        "b_seconds": iso(b["completed_at"]) - iso(b["created_at"]),
        "b_status": b["status"],
        "a_meanwhile": a_meanwhile - a_before,
        "share": share,
        "fair": fair,
        "goal": goal,
        "weight": weight,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--scenarios", default=",".join(s[0] for s in SCENARIOS))
    ap.add_argument("--no-write", action="store_true")
    add_worker_args(ap)
    args = ap.parse_args()
    wanted = set(args.scenarios.split(","))
    logdir = ROOT / "var" / "bench-fairness"
    results = []
    with run_simulator_in_thread(sim_config()) as sim:
        # one dispatcher per worker process (README: GATEWAY_DISPATCHERS ≈ number of worker processes)
        per_worker = args.worker_concurrency or (1 if args.worker_pool == "solo" else os.cpu_count() or 1)
        env = {
            "CELERY_TASK_DEFAULT_QUEUE": f"fairness-{secrets.token_hex(4)}",
            "GATEWAY_DISPATCHERS": str(args.workers * per_worker),
        }
        with GatewayStack(
            "shared",
            provider_file(sim),
            logdir,
            workers=args.workers,
            database_url="postgres://postgres@127.0.0.1:5432/gateway_bench_fairness",
            extra_env=env,
            worker_concurrency=args.worker_concurrency,
            worker_pool=args.worker_pool,
        ) as gw:
            pool = gw.pool_label
            for scenario in SCENARIOS:
                if scenario[0] in wanted:
                    r = run(gw, sim, scenario)
                    print(r, flush=True)
                    results.append(r)
    lines = [
        "## Fairness (bench/fairness.py)",
        "",
        f"{dt.date.today()}, commit {git_rev()}, {machine()}; `.venv/bin/python bench/fairness.py` "
        f"(gunicorn + {args.workers} × `celery -A gateway_site worker`, {pool}, GATEWAY_DISPATCHERS="
        f"{env['GATEWAY_DISPATCHERS']}; PostgreSQL + Redis, simulator without limits of its own). The machine is "
        f"shared with other engineers' work (load average at the end: {load_average()}).",
        "",
        "| scenario | B's completion before | after | fair / floor | goal | B's share while both backlogged "
        "| A's accepted requests during B |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        share = (
            "–" if r["share"] is None else f"{r['share']:.2f} (fair {r['weight'] / (r['weight'] + 1):.2f})"
        )
        lines.append(
            f"| {r['name']} | {BEFORE[r['name']]} | {r['b_seconds']:.1f} s | {r['fair']:g} s | ≤ {r['goal']:g} s "
            f"| {share} | {r['a_meanwhile']} |"
        )
    print("\n".join(lines))
    if not args.no_write:
        replace_section(ROOT / "docs" / "benchmarks.md", "fairness", "\n".join(lines))


if __name__ == "__main__":
    main()
