"""Redis Sentinel failover mid-batch (issue "Several hosts"): a real primary, a replica and a Sentinel
started by the test; the gateway's one ``REDIS_URL=redis://mymaster/0?sentinels=…`` serves the quota
store, the breaker, the journal and Celery's broker (gateway_engine/redis_target.py). The Sentinel moves
the primary while a real `celery -A gateway_site worker` runs a batch: nothing is lost, nothing is sent
twice (tests/exactly_once.py), and the clients end up on the new primary."""

from __future__ import annotations

import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest
import redis
from celery import Celery

from batches.models import Batch, BatchItem, ItemStatus
from observability.health import check_redis
from tests.engine.provider_server import ok_reply
from tests.exactly_once import assert_exactly_once
from tests.interactive.conftest import start_uvicorn, stop
from tests.servers import free_port, start_redis, wait_for_port

from .conftest import q, queue_batch, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
ITEMS = 120
LEASE = 60
MASTER = "gwmaster"
# a kill -9 of the primary: interactive calls answer again within this (measured 2026-12-03: see the
# test output; docs/operations.md "Redis Sentinel")
RESUME_BOUND_S = 15.0


class InteractiveLoad(threading.Thread):
    """Interactive calls one after another (a closed loop), each with its own X-Request-ID: what came
    back (status per call) and when the 200s came."""

    def __init__(self, url: str, key: str) -> None:
        super().__init__(daemon=True)
        self.url, self.key = url, key
        self.statuses: dict[str, int] = {}
        self.answered: list[str] = []
        self.ok_times: list[float] = []
        self.halt = threading.Event()

    @property
    def ok(self) -> int:
        return len(self.ok_times)

    def ok_after(self, t: float) -> int:
        return sum(1 for x in self.ok_times if x > t)

    def first_ok_after(self, t: float) -> float:
        return min(x for x in self.ok_times if x > t)

    def run(self) -> None:
        body = {"model": "snti", "messages": [{"role": "user", "content": "ping"}], "max_tokens": 4}
        with httpx.Client(timeout=30, trust_env=False) as http:
            n = 0
            while not self.halt.is_set():
                n += 1
                rid = f"i{n:05d}"
                headers = {
                    "Authorization": f"Bearer {self.key}",
                    "X-Request-ID": rid,
                    "X-Gateway-Max-Wait": "5",
                }
                try:
                    r = http.post(f"{self.url}/v1/chat/completions", json=body, headers=headers)
                except httpx.HTTPError:
                    self.statuses[rid] = -1
                    continue
                self.statuses[rid] = r.status_code
                if r.status_code == 200:
                    self.answered.append(rid)
                    self.ok_times.append(time.monotonic())
                else:
                    time.sleep(0.05)

    def stop(self) -> None:
        self.halt.set()
        self.join(40)


def start_sentinel(directory: Path, primary_port: int) -> tuple[subprocess.Popen, int]:
    port = free_port()
    conf = directory / "sentinel.conf"  # Sentinel rewrites its file: one of its own
    conf.write_text(
        f"port {port}\nbind 127.0.0.1\ndir {directory}\n"
        f"sentinel monitor {MASTER} 127.0.0.1 {primary_port} 1\n"
        f"sentinel down-after-milliseconds {MASTER} 1000\n"
        f"sentinel failover-timeout {MASTER} 5000\n"
        f"sentinel parallel-syncs {MASTER} 1\n"
    )
    proc = subprocess.Popen(
        ["redis-server", str(conf), "--sentinel"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    if not wait_for_port(port):
        proc.kill()
        raise RuntimeError("redis-sentinel did not start")
    return proc, port


def master_port(sentinel: redis.Redis) -> int:
    host, port = sentinel.execute_command("SENTINEL", "get-master-addr-by-name", MASTER)
    return int(port)


def script_calls(client: redis.Redis) -> int:
    return int(client.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0))


def _replicas_known(sentinel: redis.Redis) -> bool:
    return any(r.get("flags") == "slave" for r in sentinel.sentinel_slaves(MASTER))


def _in_sync(client: redis.Redis) -> bool:
    info = client.info("replication")
    return info.get("role") == "slave" and info.get("master_link_status") == "up"


@pytest.mark.timeout(240)
@pytest.mark.parametrize("how", ["failover", "kill -9"])
def test_a_sentinel_failover_mid_batch_loses_nothing_and_sends_nothing_twice(
    how, provider_server, make_provider, team, api_key, workers, tmp_path, settings
):
    """``failover``: SENTINEL FAILOVER (a planned switch, as a managed Redis's maintenance does);
    ``kill -9``: the primary dies, the Sentinel finds it down after 1 s and promotes the replica, while a
    web process (uvicorn, the ASGI app) on the same URL serves interactive calls one after another."""
    provider_server.behaviours["snt"] = lambda n, r, a, b: ok_reply(0.01)
    make_provider("snt", base_url=provider_server.url("snt"), rpm=1200, burst_seconds=1, max_concurrency=4)
    for d in ("a", "b", "s"):
        (tmp_path / d).mkdir()
    primary, standby = start_redis(tmp_path / "a"), start_redis(tmp_path / "b")
    a, b = redis.Redis.from_url(primary.url), redis.Redis.from_url(standby.url)
    sentinel_proc, sentinel_port = None, 0
    w = None
    try:
        b.replicaof("127.0.0.1", primary.port)
        wait_for(lambda: _in_sync(b), 20, "the standby to sync")
        sentinel_proc, sentinel_port = start_sentinel(tmp_path / "s", primary.port)
        sentinel = redis.Redis(port=sentinel_port)
        wait_for(lambda: _replicas_known(sentinel), 30, "the Sentinel to find the replica")
        url = f"redis://{MASTER}/0?sentinels=127.0.0.1:{sentinel_port}"
        w = workers(
            REDIS_URL=url,
            CELERY_BROKER_URL="",  # derived from REDIS_URL: kombu's sentinel:// transport
            GATEWAY_DISPATCHERS=1,
            GATEWAY_DISPATCH_SLICE_SECONDS=120,  # the failover happens inside one running slice
            GATEWAY_CLAIM_LEASE_SECONDS=LEASE,
        )
        w.start("w1")
        batch = queue_batch(team, [q(f"s{i:03d}", "snt") for i in range(ITEMS)])
        app = Celery(broker=f"sentinel://127.0.0.1:{sentinel_port}/0", set_as_current=False)
        app.conf.broker_transport_options = {"master_name": MASTER}
        app.send_task("batches.start_batch", args=[str(batch.id)], queue=w.queue)
        app.close()
        load = None
        if how == "kill -9":
            make_provider("snti", base_url=provider_server.url("snti"), rpm=60_000, max_concurrency=8)
            web, web_url = start_uvicorn(tmp_path / "web.log", REDIS_URL=url, CELERY_BROKER_URL="")
            load = InteractiveLoad(web_url, api_key[1])
            load.start()
            wait_for(
                lambda: load.ok >= 5,
                30,
                "interactive calls to flow",
                lambda: (tmp_path / "web.log").read_text(),
            )
        wait_for(lambda: provider_server.count("snt") >= 20, 60, "the batch to start", w.logs)
        assert b.dbsize() > 0  # the gateway writes through the Sentinel's primary, replicated to b
        if how == "failover":
            sentinel.execute_command("SENTINEL", "FAILOVER", MASTER)
        else:
            primary.proc.kill()
            primary.proc.wait(10)
            killed_at = time.monotonic()
            settings.REDIS_URL = url  # this process's readiness check, on the same URL as the worker
            down = check_redis()
            assert not down.ok and "Connection" in down.detail, down  # /readyz says Redis is away
        wait_for(lambda: master_port(sentinel) == standby.port, 30, "the Sentinel to promote the standby")
        if how != "failover":
            wait_for(lambda: check_redis().ok, 10, "readiness to see Redis again")
            assert load is not None
            wait_for(lambda: load.ok_after(killed_at) >= 5, 30, "interactive calls to flow again")
            back = load.first_ok_after(killed_at) - killed_at
            print(f"\nkill -9 of the Redis primary: interactive calls answered again {back:.2f} s later")
            assert back < RESUME_BOUND_S, back  # docs/operations.md "Redis Sentinel"
        scripts_at_promotion = script_calls(b)
        if how == "failover":
            wait_for(lambda: _in_sync(a), 30, "the old primary to follow the new one")
        wait_for(
            lambda: Batch.objects.filter(id=batch.id, completed_at__isnull=False).exists(),
            LEASE / 2,
            "the batch to end inside the running slice",
            w.logs,
        )
        # the gateway's clients moved to the new primary: they run their scripts there now (a replica
        # gets a script's effects, never the EVALSHA itself)
        assert b.info("replication")["role"] == "master"
        assert script_calls(b) > scripts_at_promotion, w.logs()
    finally:
        if load is not None:
            load.stop()
            stop(web)
        if w is not None:
            w.stop()
        a.close()
        b.close()
        if sentinel_proc is not None:
            sentinel_proc.terminate()
            sentinel_proc.wait(10)
        for server in (primary, standby):
            server.stop()
    statuses = Counter(BatchItem.objects.filter(batch=batch).values_list("status", flat=True))
    assert statuses == {ItemStatus.SUCCEEDED: ITEMS}, statuses
    per_item = Counter(h.request_id for h in provider_server.hits if h.provider == "snt")
    assert set(per_item) == {f"s{i:03d}" for i in range(ITEMS)}
    assert sum(n - 1 for n in per_item.values()) == 0, "an item was sent twice"
    assert_exactly_once([batch], [provider_server])
    if load is not None:
        # every call answered 200 is one request at the provider (the gateway's request id of a call is
        # the same on each of its attempts: none was sent twice); a call refused while Redis was away
        # (503, before anything was sent) reached no provider
        sent = Counter(h.request_id for h in provider_server.hits if h.provider == "snti")
        assert all(n == 1 for n in sent.values()), [r for r, n in sent.items() if n > 1]
        refused = [rid for rid, code in load.statuses.items() if code != 200]
        assert all(load.statuses[rid] == 503 for rid in refused), {r: load.statuses[r] for r in refused}
        assert len(load.answered) <= sum(sent.values()) <= len(load.answered) + len(refused)
        print(
            f"interactive: {len(load.answered)} answered, {len(refused)} refused with 503, "
            f"{sum(sent.values())} provider requests"
        )
