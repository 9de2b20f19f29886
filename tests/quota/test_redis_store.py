"""Redis-only behaviour: script cache, failure policy, key hygiene, store selection."""

from __future__ import annotations

import asyncio
import time

import pytest
from django.conf import settings
from django.test import override_settings

from gateway_engine.quota import LocalQuotaStore, QuotaStoreUnavailable
from gateway_engine.quota.redis_conn import redact_url
from gateway_engine.quota.redis_store import RedisQuotaStore
from providers.limits import build_quota_store, get_quota_store, reset_quota_store, snapshot_all_sync

from .conftest import make_limits, run


def test_noscript_after_script_flush_is_transparent(private_redis_store, private_redis_sync):
    redis_store, redis_sync = private_redis_store, private_redis_sync  # SCRIPT FLUSH: never the shared one
    limits = make_limits(rpm=6000, max_concurrency=2)

    async def body():
        assert (await redis_store.try_acquire(limits, 5)).granted
        redis_sync.script_flush()
        assert not redis_sync.script_exists(redis_store.connection.scripts["ACQUIRE"].sha)[0]
        assert (await redis_store.try_acquire(limits, 5)).granted  # NOSCRIPT → SCRIPT LOAD → EVALSHA
        assert redis_sync.script_exists(redis_store.connection.scripts["ACQUIRE"].sha)[0]
        redis_sync.script_flush()
        async with redis_store.lease(limits):
            state = await redis_store.snapshot(limits)
        assert state.leases_in_flight == 1 and state.observed_rpm == 2

    run(redis_store, body)


@pytest.mark.parametrize("operation", ["acquire", "lease", "reconcile", "penalize", "snapshot", "config"])
def test_redis_down_raises_quota_store_unavailable(operation):
    store = RedisQuotaStore("redis://:s3cret@127.0.0.1:1/0", prefix="down:", global_max_in_flight=2)
    limits = make_limits()

    async def body():
        if operation == "acquire":
            await store.acquire(limits, 1)
        elif operation == "lease":
            async with store.lease(limits):
                pass
        elif operation == "reconcile":
            from gateway_engine.quota import Reservation

            await store.reconcile(limits, Reservation(limits.name, 10), 5)
        elif operation == "penalize":
            await store.penalize(limits, 5)
        elif operation == "snapshot":
            await store.snapshot(limits)
        else:
            await store.config_version()

    with pytest.raises(QuotaStoreUnavailable) as info:
        run(store, body)
    message = str(info.value)
    assert "127.0.0.1:1" in message and "s3cret" not in message and "retryable" in message


def test_redact_url():
    assert redact_url("redis://user:pw@host:6380/1") == "redis://user:***@host:6380/1"
    assert redact_url("redis://host:6379/0") == "redis://host:6379/0"


def test_bucket_keys_expire_once_full(redis_store, redis_sync):
    limits = make_limits(rpm=600, burst_seconds=2.0)

    async def body():
        await redis_store.acquire(limits, 3)
        async with redis_store.lease(limits):
            pass

    run(redis_store, body)
    bucket, obs, leases = redis_store.connection.provider_keys(limits.name)
    assert 0 < redis_sync.pttl(bucket) <= 2_000 + 1_000 + 50  # refill time + 1 s margin
    assert 0 < redis_sync.pttl(obs) <= 61_000
    assert not redis_sync.exists(leases) or redis_sync.pttl(leases) > 0


def test_get_quota_store_follows_settings():
    reset_quota_store()
    try:
        with override_settings(GATEWAY_QUOTA_BACKEND="local"):
            local = get_quota_store()
            assert isinstance(local, LocalQuotaStore) and get_quota_store() is local
        reset_quota_store()
        with override_settings(GATEWAY_QUOTA_BACKEND="redis", GATEWAY_REDIS_PREFIX="bgwtest:factory:"):
            shared = get_quota_store()
            assert isinstance(shared, RedisQuotaStore) and shared.prefix == "bgwtest:factory:"
        reset_quota_store()
        with (
            override_settings(GATEWAY_QUOTA_BACKEND="nonsense"),
            pytest.raises(ValueError, match="GATEWAY_QUOTA"),
        ):
            get_quota_store()
    finally:
        reset_quota_store()


def test_one_client_per_event_loop(redis_store):
    clients = []

    async def grab():
        clients.append(redis_store.client())
        assert redis_store.client() is clients[-1]
        return await redis_store.ping()

    assert asyncio.run(grab())  # no aclose: the next loop must not reuse this loop's client
    assert run(redis_store, grab)
    assert clients[0] is not clients[1]


def test_snapshot_all_sync_from_sync_and_async_callers(redis_sync):
    reset_quota_store()
    try:
        limits = [make_limits(rpm=600), make_limits(rpm=1200)]
        store = get_quota_store()
        run(store, store.acquire, limits[1], 7)
        states = snapshot_all_sync(limits)
        assert [s.provider for s in states] == [lim.name for lim in limits]
        assert (states[0].observed_rpm, states[1].observed_rpm, states[1].observed_tpm) == (0, 1, 7)

        async def inside_a_loop():
            return snapshot_all_sync(limits)

        assert asyncio.run(inside_a_loop())[1].observed_tpm == 7
    finally:
        reset_quota_store()


def test_dropped_connection_fails_loudly_then_reconnects(private_redis_store, private_redis_sync):
    redis_store, redis_sync = private_redis_store, private_redis_sync  # CLIENT KILL: never the shared one
    limits = make_limits(rpm=6000)

    async def body():
        assert (await redis_store.try_acquire(limits)).granted
        proto = redis_store.client()._proto
        host, port = proto.transport.get_extra_info("sockname")[:2]
        pending = asyncio.ensure_future(redis_store.try_acquire(limits))
        await asyncio.sleep(0)  # the command is written; now the server drops us
        redis_sync.client_kill(f"{host}:{port}")
        try:
            await pending  # raced the kill: either answered or failed loudly, never hangs
        except QuotaStoreUnavailable as exc:
            assert "cannot reach Redis" in str(exc)
        for _ in range(50):  # the lost connection is noticed, then the next call reconnects
            try:
                if (await redis_store.try_acquire(limits)).granted:
                    break
            except QuotaStoreUnavailable:
                await asyncio.sleep(0.01)
        assert redis_store.client()._proto is not proto
        assert (await redis_store.snapshot(limits)).observed_rpm >= 2

    run(redis_store, body)


def test_unresponsive_redis_times_out_as_unavailable():
    import socket

    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)  # the kernel completes the handshake; nobody ever answers
    port = listener.getsockname()[1]
    try:
        store = RedisQuotaStore(
            f"redis://127.0.0.1:{port}/0", prefix="hung:", global_max_in_flight=1, command_timeout=0.5
        )
        started = time.monotonic()
        with pytest.raises(QuotaStoreUnavailable, match="no reply from Redis within 0.5 s"):
            run(store, store.try_acquire, make_limits())
        assert time.monotonic() - started < 3.0
    finally:
        listener.close()


def test_database_number_in_url_is_selected(redis_sync):
    import redis

    prefix = settings.GATEWAY_REDIS_PREFIX + "dbsel:" + make_limits().name + ":"
    store = RedisQuotaStore(
        settings.REDIS_URL.rsplit("/", 1)[0] + "/5", prefix=prefix, global_max_in_flight=1
    )
    other = redis.Redis.from_url(settings.REDIS_URL.rsplit("/", 1)[0] + "/5")
    try:
        limits = make_limits()
        assert run(store, store.try_acquire, limits, 3).granted
        bucket = store.connection.provider_keys(limits.name)[0]
        assert other.exists(bucket) and not redis_sync.exists(bucket)
    finally:
        keys = list(other.scan_iter(match=prefix + "*"))
        if keys:
            other.delete(*keys)
        other.close()


def test_two_workers_share_pause_buckets_and_leases(redis_store):
    """Two store instances (as in two worker processes) on one prefix see the same state."""
    other = RedisQuotaStore(settings.REDIS_URL, prefix=redis_store.prefix, global_max_in_flight=1)
    limits = make_limits(rpm=600, max_concurrency=1)

    async def body():
        for _ in range(10):
            assert (await redis_store.try_acquire(limits)).granted
        assert not (await other.try_acquire(limits)).granted  # the burst was spent by the first worker
        await redis_store.penalize(limits, 2.0)
        decision = await other.try_acquire(limits)
        assert not decision.granted and decision.wait_ms > 1500  # the 429 pause reaches the other worker
        async with redis_store.lease(limits):
            assert await other.lease_pool.try_take(limits, "x") > 0
        assert await other.lease_pool.try_take(limits, "x") == 0
        await other.aclose()

    run(redis_store, body)


def test_cluster_wide_in_flight_cap_across_workers(redis_store):
    """With GATEWAY_CLUSTER_MAX_IN_FLIGHT set, global_slot() also holds a shared lease."""
    workers = [
        RedisQuotaStore(
            settings.REDIS_URL, prefix=redis_store.prefix, global_max_in_flight=10, cluster_max_in_flight=3
        )
        for _ in range(2)
    ]
    in_flight = peak = 0

    async def call(store):
        nonlocal in_flight, peak
        async with store.global_slot():
            in_flight += 1
            peak = max(peak, in_flight)
            await asyncio.sleep(0.02)
            in_flight -= 1

    async def body():
        await asyncio.gather(*(call(workers[i % 2]) for i in range(16)))
        for w in workers[1:]:
            await w.aclose()

    run(workers[0], body)
    assert peak == 3  # each worker alone would have allowed 10


def test_cluster_cap_setting_is_read(redis_store):
    """The Django adapter passes the settings to the (Django-free) store."""
    with override_settings(
        GATEWAY_CLUSTER_MAX_IN_FLIGHT=7, GATEWAY_GLOBAL_MAX_IN_FLIGHT=9, GATEWAY_QUOTA_BACKEND="redis"
    ):
        store = build_quota_store()
        assert (store.cluster_max_in_flight, store.global_max_in_flight) == (7, 9)
    assert RedisQuotaStore(settings.REDIS_URL, prefix="x:").cluster_max_in_flight == 0
    assert LocalQuotaStore().cluster_max_in_flight == 0
