"""A Redis failover mid-batch (issue "What the last wave left open", part 2): the gateway's Redis answers
``READONLY`` for a while — it became a replica, as a managed endpoint does during a failover — then is
promoted back. A real `celery -A gateway_site worker` rides it through like a dropped connection (the
engine's RESP client and the Django side's redis-py clients, gateway_engine/redis_errors.py): nothing is
lost, nothing is sent twice (tests/exactly_once.py), on redis-servers this test starts itself."""

from __future__ import annotations

import time
from collections import Counter

import pytest
import redis

from batches.models import Batch, BatchItem, ItemStatus
from tests.engine.provider_server import ok_reply
from tests.exactly_once import assert_exactly_once
from tests.servers import start_redis

from .conftest import q, queue_batch, wait_for
from .test_outages import send_start

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
ITEMS = 150
LEASE = 60  # the default claim lease


def _replica_in_sync(client: redis.Redis) -> bool:
    info = client.info("replication")
    return info.get("role") == "slave" and info.get("master_link_status") == "up"


@pytest.mark.timeout(240)
def test_a_readonly_redis_mid_batch_loses_nothing_and_sends_nothing_twice(
    provider_server, make_provider, team, workers, tmp_path
):
    provider_server.behaviours["rof"] = lambda n, r, a, b: ok_reply(0.01)
    make_provider("rof", base_url=provider_server.url("rof"), rpm=600, burst_seconds=1, max_concurrency=4)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "broker").mkdir()
    primary, standby = start_redis(tmp_path / "a"), start_redis(tmp_path / "b")
    broker = start_redis(tmp_path / "broker")  # Celery's broker apart: the failover is the gateway's Redis
    a, b = redis.Redis.from_url(primary.url), redis.Redis.from_url(standby.url)
    w = None
    try:
        b.replicaof("127.0.0.1", primary.port)  # the standby follows the primary: it holds the same data
        wait_for(lambda: _replica_in_sync(b), 20, "the standby to sync")
        w = workers(
            REDIS_URL=primary.url,
            CELERY_BROKER_URL=broker.url,
            GATEWAY_DISPATCHERS=1,
            GATEWAY_DISPATCH_SLICE_SECONDS=120,  # the failover happens inside one running slice
            GATEWAY_CLAIM_LEASE_SECONDS=LEASE,
        )
        w.start("w1")
        batch = queue_batch(team, [q(f"f{i:03d}", "rof") for i in range(ITEMS)])
        send_start(broker.url, w.queue, batch.id)
        wait_for(lambda: provider_server.count("rof") >= 30, 60, "the batch to start", w.logs)
        # the failover: the standby is promoted, the gateway's address now reaches a replica (READONLY)
        b.replicaof("NO", "ONE")
        a.replicaof("127.0.0.1", standby.port)
        wait_for(lambda: _replica_in_sync(a), 20, "the old primary to follow the new one")
        with pytest.raises(redis.exceptions.ReadOnlyError):
            a.set("probe", "1")
        at_readonly = provider_server.count("rof")
        time.sleep(3)
        during = provider_server.count("rof") - at_readonly
        print(f"\nredis READONLY: {during} provider requests during the 3 s (at most 4 in flight)")
        assert during <= 4, f"{during} provider requests while Redis refused writes\n{w.logs()}"
        a.replicaof("NO", "ONE")  # promoted back: writes are taken again at the same address
        # ridden through inside the running slice: the batch ends well inside one claim lease (60 s), not
        # after a failed slice's claims expired and were claimed again
        wait_for(
            lambda: Batch.objects.filter(id=batch.id, completed_at__isnull=False).exists(),
            LEASE / 2,
            "the batch to end inside the running slice",
            w.logs,
        )
    finally:
        if w is not None:
            w.stop()
        a.close()
        b.close()
        for server in (primary, standby, broker):
            server.stop()
    statuses = Counter(BatchItem.objects.filter(batch=batch).values_list("status", flat=True))
    assert statuses == {ItemStatus.SUCCEEDED: ITEMS}, statuses
    per_item = Counter(h.request_id for h in provider_server.hits if h.provider == "rof")
    assert set(per_item) == {f"f{i:03d}" for i in range(ITEMS)}
    assert sum(n - 1 for n in per_item.values()) == 0, "an item was sent twice"
    assert_exactly_once([batch], [provider_server])
    log = (tmp_path / "w1.log").read_text(errors="replace")
    assert "READONLY" in log  # loud, not silent
