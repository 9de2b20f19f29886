"""Real OS processes sharing one provider's quota through real Redis."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings

from .conftest import assert_within_rate, make_limits, run

ROOT = Path(__file__).resolve().parents[2]


def spawn(*args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.quota.hammer", *args],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


@pytest.mark.slow
def test_four_processes_share_one_bucket(redis_store):
    """rpm 600, burst 1 s, 10 s, 4 processes × 4 callers: grants ≤ 10 + 100 (+1), ≥ 95 % of that."""
    name = make_limits().name
    procs = [
        spawn("acquire", settings.REDIS_URL, redis_store.prefix, name, "600", "1", "stdin", "10")
        for _ in range(4)
    ]
    counts = []
    try:
        for proc in procs:  # every interpreter is up and connected before the clock runs
            line = proc.stdout.readline()
            assert line.strip() == "ready", proc.stderr.read() if proc.poll() is not None else line
        start = time.time() + 0.3
        for proc in procs:
            proc.stdin.write(f"go {start!r}\n")
            proc.stdin.flush()
        for proc in procs:
            out, err = proc.communicate(timeout=40)
            assert proc.returncode == 0, err
            counts.append(int(out.strip().splitlines()[-1]))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    total = sum(counts)
    print("grants per process", counts, "total", total)
    assert total <= 10 + 100 + 1, counts
    assert total >= 0.95 * 110, counts
    assert all(c > 5 for c in counts), counts  # every process got a share: one bucket, shared


@pytest.mark.slow
def test_killed_holder_slots_return_within_ttl(redis_store):
    limits = make_limits(max_concurrency=3, timeout_seconds=0.5, lease_grace_seconds=1.5)  # TTL 2 s
    proc = spawn("hold", settings.REDIS_URL, redis_store.prefix, limits.name, "3", "0.5", "1.5")
    try:
        line = proc.stdout.readline()
        assert line.strip() == "held", proc.stderr.read() if proc.poll() is not None else line
        time.sleep(limits.lease_ttl_seconds + 0.8)  # longer than the TTL: only heartbeats keep them
        assert run(redis_store, redis_store.snapshot, limits).leases_in_flight == 3
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=5)
        killed_at = time.monotonic()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

    async def take_all():
        # the dead process's leases still count until their TTL runs out
        assert await redis_store.lease_pool.try_take(limits, "probe") > 0
        got = []
        async with redis_store.lease(limits), redis_store.lease(limits), redis_store.lease(limits):
            got.append(time.monotonic() - killed_at)
        return got[0]

    waited = run(redis_store, take_all)
    assert waited <= limits.lease_ttl_seconds + 1.0, waited


@pytest.mark.slow
def test_tpm_across_processes_never_exceeds_the_bucket(redis_store):
    """3 processes × 4 callers take random-size token reservations for 3 s: in every window the
    tokens granted (by Redis server time) stay within capacity + rate × w, and the bucket was busy."""
    limits = make_limits(rpm=60_000, tpm=180_000, burst_seconds=1.0)  # 3,000 tokens, 3,000/s
    procs = [
        spawn("tpm", settings.REDIS_URL, redis_store.prefix, limits.name, "60000", "180000", "3", str(seed))
        for seed in range(3)
    ]
    grants = []
    try:
        for proc in procs:
            line = proc.stdout.readline()
            assert line.strip() == "ready", proc.stderr.read() if proc.poll() is not None else line
        start = time.time() + 0.3
        for proc in procs:
            proc.stdin.write(f"go {start!r}\n")
            proc.stdin.flush()
        for proc in procs:
            out, err = proc.communicate(timeout=30)
            assert proc.returncode == 0, err
            grants += [tuple(g) for g in json.loads(out.strip().splitlines()[-1])]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    total = sum(t for _, t in grants)
    assert len(grants) >= 50, len(grants)
    assert total >= 0.8 * (3_000 + 3_000 * 3), total  # saturated: burst + refill, nearly all used
    assert_within_rate(grants, limits.tpm_per_ms, limits.tpm_capacity, "tpm across processes")
