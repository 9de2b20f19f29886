"""A failover answer (READONLY, LOADING, MASTERDOWN) is "Redis cannot be reached" (REDIS_ERRORS) on both
clients, and the next call reconnects: on a real replica this test starts itself (tests.servers)."""

from __future__ import annotations

import asyncio

import pytest
import redis

from gateway_engine.quota.redis_store import RedisQuotaStore
from gateway_engine.quota.resp import RespClient
from gateway_engine.quota.types import QuotaStoreUnavailable
from gateway_engine.redis_errors import REDIS_ERRORS, failover_error
from gateway_site.redis import sync_redis
from tests.servers import start_redis
from tests.waiting import wait_until


def test_failover_replies_are_redis_errors_and_others_are_not():
    for reply in (
        "READONLY You can't write against a read only replica.",
        "LOADING Redis is loading",
        "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.",
    ):
        assert isinstance(failover_error(reply), REDIS_ERRORS), reply
    assert failover_error("ERR unknown command") is None
    assert failover_error("WRONGTYPE Operation against a key holding the wrong kind of value") is None


@pytest.fixture
def replica(tmp_path):
    (tmp_path / "p").mkdir()
    (tmp_path / "r").mkdir()
    primary, other = start_redis(tmp_path / "p"), start_redis(tmp_path / "r")
    client = redis.Redis.from_url(other.url)
    client.replicaof("127.0.0.1", primary.port)
    wait_until(lambda: client.info("replication").get("master_link_status") == "up", timeout=20)
    yield other, client
    client.close()
    other.stop()
    primary.stop()


def test_the_resp_client_raises_readonly_then_reconnects_to_the_promoted_server(replica):
    server, admin = replica

    async def scenario():
        client = RespClient(server.url)
        try:
            assert await client.call("GET", "k") is None  # reads work on a replica
            with pytest.raises(redis.exceptions.ReadOnlyError):
                await client.call("SET", "k", "1")
            admin.replicaof("NO", "ONE")  # promoted: the next call's new connection may write
            assert await client.call("SET", "k", "1") == b"OK"
        finally:
            await client.aclose()

    asyncio.run(scenario())


def test_the_quota_store_turns_readonly_into_unavailable(replica):
    server, _ = replica

    async def scenario():
        store = RedisQuotaStore(server.url, prefix="bgwtest:failover:")
        try:
            with pytest.raises(QuotaStoreUnavailable, match="ReadOnlyError"):
                await store.pause_provider("p", "billing")
        finally:
            await store.aclose()

    asyncio.run(scenario())


def test_the_django_side_client_rides_readonly_as_a_redis_error(replica, settings):
    server, _ = replica
    with sync_redis(server.url) as client, pytest.raises(REDIS_ERRORS):
        client.set("k", "1")
