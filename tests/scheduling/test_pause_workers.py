"""Provider pauses across real worker processes (issue "What the last wave left open", part 1): the
durable record (providers.ProviderPause) announced on the config channel reaches a worker that is
already waiting out a 429, and a pause survives a Redis restart (Redis as its cache, PostgreSQL the
record). This test process plays the worker whose answer paused the provider: it makes the same calls
the engine's hook does (store.pause_provider, then providers.pauses.record_paused). Private
redis-servers (tests.servers.start_redis, --save ""), a real `celery -A gateway_site worker`; asserted
on what the provider server saw."""

from __future__ import annotations

import time
from collections import Counter

import pytest
import redis

from batches.models import Batch, BatchItem
from gateway_engine.quota.types import PauseState
from providers import pauses
from providers.limits.factory import run_with_store
from providers.limits.source import reset_quota_store
from tests.engine.provider_server import Reply, ok_reply
from tests.servers import start_redis

from .conftest import q, queue_batch, wait_for
from .test_outages import send_start

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
BILLING = "You exceeded your current quota, please check your plan and billing details."
RETRY_AFTER = 120  # the worker would wait this long without the announcement


@pytest.fixture
def servers(tmp_path, settings):
    (tmp_path / "gw").mkdir()
    (tmp_path / "broker").mkdir()
    gateway, broker = start_redis(tmp_path / "gw"), start_redis(tmp_path / "broker")
    settings.REDIS_URL = gateway.url  # this process (the pausing one) talks to the workers' Redis
    reset_quota_store()
    yield gateway, broker, tmp_path / "gw"
    reset_quota_store()
    gateway.stop()
    broker.stop()


def pause_as_the_engine_does(name: str) -> None:
    """What recording.pause + observability's on_provider_paused do in the worker whose answer said
    insufficient_quota: the store's pause, then the durable record (announced on the config channel)."""
    run_with_store(lambda store: store.pause_provider(name, "billing", None, BILLING))
    pauses.record_paused(name, PauseState(name, "billing", None, BILLING))


def ended(batch) -> bool:
    return Batch.objects.filter(id=batch.id, completed_at__isnull=False).exists()


@pytest.mark.timeout(180)
def test_a_pause_stops_a_worker_waiting_out_a_429_before_its_wait_ends(
    servers, provider_server, make_provider, team, workers
):
    gateway, broker, _ = servers
    provider_server.behaviours["gem"] = lambda n, r, a, b: Reply(
        429, headers={"Retry-After": str(RETRY_AFTER)}
    )
    make_provider("gem", base_url=provider_server.url("gem"), rpm=600, burst_seconds=1, max_concurrency=4)
    w = workers(REDIS_URL=gateway.url, CELERY_BROKER_URL=broker.url, GATEWAY_DISPATCHERS=1)
    try:
        w.start("w1")
        batch = queue_batch(team, [q(f"p{i}", "gem") for i in range(3)])
        send_start(broker.url, w.queue, batch.id)
        wait_for(lambda: provider_server.count("gem") >= 3, 60, "the 429s", w.logs)
        time.sleep(1.0)  # the worker now waits out the Retry-After (120 s)
        paused_at = time.monotonic()
        pause_as_the_engine_does("gem")
        # the announcement wakes the waiting items: they find the provider paused and end now
        wait_for(lambda: ended(batch), 30, "the batch to end before the Retry-After", w.logs)
        took = time.monotonic() - paused_at
    finally:
        w.stop()
    after = [h for h in provider_server.hits if h.provider == "gem" and h.at > paused_at]
    assert after == [], f"{len(after)} requests to the paused provider after the pause"
    errors = Counter(BatchItem.objects.filter(batch=batch).values_list("error_type", flat=True))
    assert errors == {"provider_quota_exhausted": 3}, errors
    print(f"\npause announced → waiting items ended after {took:.2f} s (Retry-After {RETRY_AFTER} s)")


@pytest.mark.timeout(180)
def test_a_pause_survives_a_redis_restart_and_nothing_is_sent(
    servers, provider_server, make_provider, team, workers, settings
):
    gateway, broker, directory = servers
    provider_server.behaviours["gem"] = lambda n, r, a, b: ok_reply()
    make_provider("gem", base_url=provider_server.url("gem"), rpm=600, burst_seconds=1, max_concurrency=4)
    w = workers(REDIS_URL=gateway.url, CELERY_BROKER_URL=broker.url, GATEWAY_DISPATCHERS=1)
    key = f"{settings.GATEWAY_REDIS_PREFIX}q:{{gem}}:pause"
    client = None
    try:
        w.start("w1")
        warm = queue_batch(team, [q("warm", "gem")])  # the worker's LimitsSource is up and listening
        send_start(broker.url, w.queue, warm.id)
        wait_for(lambda: ended(warm), 60, "the first batch", w.logs)
        pause_as_the_engine_does("gem")
        gateway.stop()  # --save "": Redis forgets everything, the pause included
        gateway = start_redis(directory, port=gateway.port)
        client = redis.Redis.from_url(gateway.url)
        assert not client.exists(key)
        before = provider_server.count("gem")
        batch = queue_batch(team, [q(f"r{i}", "gem") for i in range(5)])
        send_start(broker.url, w.queue, batch.id)
        wait_for(lambda: ended(batch), 60, "the batch", w.logs)
        sent = provider_server.count("gem") - before
        assert sent == 0, f"{sent} requests sent to the paused provider after the Redis restart"
        # written back into Redis from PostgreSQL by the worker (its reload after the restart)
        wait_for(lambda: client.exists(key), 30, "the pause back in Redis", w.logs)
    finally:
        w.stop()
        if client is not None:
            client.close()
        gateway.stop()
    errors = Counter(BatchItem.objects.filter(batch=batch).values_list("error_type", flat=True))
    assert errors == {"provider_quota_exhausted": 5}, errors
