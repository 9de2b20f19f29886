"""REDIS_URL with Sentinels (gateway_engine/redis_target.py): parsed, refused naming what is wrong, and
turned into kombu's broker form. (The failover itself: tests/scheduling/test_redis_sentinel.py.)"""

from __future__ import annotations

import asyncio

import pytest

from gateway_engine.redis_target import MasterUnknown, RedisTarget, celery_broker


def test_a_plain_url_is_itself():
    t = RedisTarget.parse("redis://:pw@10.0.0.5:6380/2")
    assert (t.url, t.sentinels, t.master, t.db) == ("redis://:pw@10.0.0.5:6380/2", (), "", 2)
    assert celery_broker("redis://:pw@10.0.0.5:6380/2") == ("redis://:pw@10.0.0.5:6380/2", {})


def test_sentinels_name_the_master_by_the_host():
    t = RedisTarget.parse("redis://:pw@mymaster/3?sentinels=10.0.0.1:26379,10.0.0.2,[::1]:26380")
    assert t.master == "mymaster" and t.db == 3 and t.url == "redis://:pw@mymaster/3"
    assert t.sentinels == (("10.0.0.1", 26379), ("10.0.0.2", 26379), ("::1", 26380))
    broker, options = celery_broker("redis://:pw@mymaster/3?sentinels=10.0.0.1:26379,10.0.0.2:26379")
    assert broker == "sentinel://:pw@10.0.0.1:26379/3;sentinel://:pw@10.0.0.2:26379/3"
    assert options == {"master_name": "mymaster"}


@pytest.mark.parametrize(
    "url, says",
    [
        ("redis://mymaster:6379/0?sentinels=h:26379", "has no port"),
        ("redis://mymaster/0?sentinels=", "sentinels is empty"),
        ("redis://mymaster/0?sentinels=h:notaport", "'h:notaport' is not host:port"),
        ("unix:///tmp/r.sock?sentinels=h:26379", "redis:// or rediss://"),
    ],
)
def test_bad_sentinel_urls_are_refused_naming_the_part(url, says):
    with pytest.raises(ValueError, match="REDIS_URL") as caught:
        RedisTarget.parse(url)
    assert says in str(caught.value)


def test_no_answering_sentinel_is_a_connection_error_naming_each():
    t = RedisTarget.parse("redis://mymaster/0?sentinels=127.0.0.1:9,127.0.0.1:1")
    with pytest.raises(MasterUnknown) as caught:
        asyncio.run(t.master_address(1.0))
    assert isinstance(caught.value, ConnectionError)
    assert "127.0.0.1:9" in str(caught.value) and "127.0.0.1:1" in str(caught.value)
