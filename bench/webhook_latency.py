"""Batch end → webhook received (issue #26): p50/p95 of (the receiver's arrival time − the batch's
``completed_at``), both wall clock on this host.

    .venv/bin/python bench/webhook_latency.py                      # 40 batches of 5 items, one after another
    .venv/bin/python bench/webhook_latency.py --batches 20 --concurrent 4

Stack: bench.stack.GatewayStack "shared" (gunicorn + --workers × `celery -A gateway_site worker`, Celery's
default prefork pool and concurrency), PostgreSQL + Redis, the simulator in its own process (one provider,
~1 ms), GATEWAY_WEBHOOK_ALLOW_PRIVATE on (the receiver is a local HTTP server in this process,
tests/webhooks/receiver.py, answering 200 at once). Each batch is POSTed with ``webhook_url``; the figure
is when its signed event arrived relative to the finalizing commit's ``completed_at``. With
``--concurrent N`` N batches run at once (dispatcher slices then share the pool children with the
delivery task). Goal (issue #26): p95 ≤ 2 s.
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import command_line, load_average, machine, pct, utc_now  # noqa: E402
from bench.overhead import provider_file  # noqa: E402
from bench.stack import TERMINAL, GatewayStack  # noqa: E402
from sim.testing import run_simulator_subprocess  # noqa: E402
from tests.webhooks.receiver import Receiver  # noqa: E402

SIM_CFG = {"providers": {"fast": {"model": "fast-1ms", "median_ms": 1, "sigma": 0, "completion_tokens": 4}}}
GOAL_S = 2.0


def one_batch(gw: GatewayStack, receiver: Receiver, tag: str, n: int) -> float:
    items = [{"custom_id": f"{tag}-{i}", "route": "echo", "query": f"ping {i}", "params": {"max_tokens": 4}}
             for i in range(n)]  # fmt: skip
    r = gw.http.post(f"{gw.url}/api/v1/batches", json={"items": items, "webhook_url": receiver.url("/ok")},
                     headers=gw.headers, timeout=60)  # fmt: skip
    if r.status_code != 201:
        raise RuntimeError(f"submit: HTTP {r.status_code}: {r.text[:300]}")
    batch_id = r.json()["id"]
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        got = receiver.acked(batch_id)
        if got:
            batch = gw.get(batch_id)
            assert batch["status"] in TERMINAL, batch["status"]
            ended = dt.datetime.fromisoformat(batch["completed_at"].replace("Z", "+00:00")).timestamp()
            return got[0].at - ended
        time.sleep(0.01)
    raise RuntimeError(f"batch {batch_id}: no webhook within 120 s")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batches", type=int, default=40)
    ap.add_argument("--items", type=int, default=5)
    ap.add_argument("--concurrent", type=int, default=1)
    ap.add_argument("--workers", type=int, default=1)
    args = ap.parse_args(argv)
    logdir = Path("var/bench/webhook_latency")
    logdir.mkdir(parents=True, exist_ok=True)
    receiver = Receiver()
    samples: list[float] = []
    lock = threading.Lock()
    with run_simulator_subprocess(SIM_CFG, log_path=logdir / "sim.log") as sim:
        with GatewayStack("shared", provider_file(sim.base_url, 16), logdir, workers=args.workers,
                          extra_env={"GATEWAY_WEBHOOK_ALLOW_PRIVATE": "1"}) as gw:  # fmt: skip
            one_batch(gw, receiver, "warm", args.items)  # first request of each process is not measured

            def runner(k: int) -> None:
                for j in range(k, args.batches, args.concurrent):
                    s = one_batch(gw, receiver, f"b{j}", args.items)
                    with lock:
                        samples.append(s)

            threads = [threading.Thread(target=runner, args=(k,)) for k in range(args.concurrent)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            pool = gw.pool_label
    receiver.close()
    p50, p95 = statistics.median(samples), pct(samples, 0.95)
    print(f"# webhook latency, {utc_now()}, {machine()}, load {load_average()}")
    print(f"# {command_line('bench/webhook_latency.py', argv)}; workers {args.workers} ({pool})")
    print(f"batches {len(samples)} × {args.items} items, {args.concurrent} at a time: batch end → event received "
          f"p50 {p50 * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms, max {max(samples) * 1000:.0f} ms "
          f"(goal p95 ≤ {GOAL_S:g} s: {'met' if p95 <= GOAL_S else 'NOT met'})")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
