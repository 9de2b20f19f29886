"""The attempt journal on real Redis and PostgreSQL: noted before the request leaves, marked sent, folded
into the item when nobody stores the answer, deleted when the result is stored (issue #19)."""

from __future__ import annotations

import json

import pytest
from django.conf import settings

from batches import execution
from batches.execution import journal
from batches.models import BatchItem, ItemStatus
from gateway_engine import ItemResult
from gateway_engine.journal import entry, key, sent_mark
from tests.exactly_once import assert_exactly_once
from tests.factories import claim

from .provider_server import ok_reply
from .test_execution import make_batch, q

pytestmark = pytest.mark.django_db(transaction=True)


def jkey(owner: str, item: BatchItem) -> str:
    return key(settings.GATEWAY_REDIS_PREFIX, owner, str(item.batch_id), item.custom_id)


def ok(cid: str, provider: str = "jp", *, attempts: int = 1) -> ItemResult:
    log = [
        {"provider": provider, "status_code": 200, "error_type": "", "latency_ms": 5, "prompt_tokens": 3,
         "completion_tokens": 2, "tokens": 5, "used": n == attempts, "at": ""}
        for n in range(1, attempts + 1)
    ]  # fmt: skip
    return ItemResult(cid, "succeeded", provider=provider, attempts=attempts, attempt_log=log)


def test_each_attempt_is_in_redis_before_the_provider_sees_it_and_gone_once_stored(
    provider_server, make_provider, team, redis_sync
):
    seen_in_journal: dict[str, bool] = {}

    def behaviour(name, rid, attempt, body):
        # the provider side looks into Redis as the request arrives: the attempt is already noted
        keys = list(redis_sync.scan_iter(match=f"{settings.GATEWAY_REDIS_PREFIX}j:*:{rid}"))
        entries = [json.loads(e) for k in keys for e in redis_sync.lrange(k, 0, -1)]
        seen_in_journal[rid] = any(e.get("attempt") == attempt for e in entries)
        return ok_reply(0.01)

    provider_server.behaviours["jp"] = behaviour
    make_provider("jp", base_url=provider_server.url("jp"), rpm=60_000, tpm=10**8, max_concurrency=4)
    batch = make_batch(team, [q(f"j{i}", provider="jp", max_tokens=4) for i in range(6)])
    execution.DispatchSlice(5).run()
    assert seen_in_journal == {f"j{i}": True for i in range(6)}
    # stored: nothing left to fold
    assert list(redis_sync.scan_iter(match=f"{settings.GATEWAY_REDIS_PREFIX}j:*")) == []
    assert_exactly_once([batch.id], [provider_server])


def test_a_dead_owners_sent_attempts_are_folded_and_the_next_result_adds_to_them(
    team, make_provider, redis_sync
):
    make_provider("jp")
    batch = make_batch(team, [q("a", provider="jp"), q("b", provider="jp")])
    dead = "host:1:dead00:slice001"
    a, b = sorted(claim(str(batch.id), owner=dead), key=lambda i: i.custom_id)
    # a: two attempts left (marked sent); b: noted, but the worker died before the request left
    redis_sync.rpush(
        jkey(dead, a), entry("jp", 1, 40, "t1"), sent_mark(1), entry("jp", 2, 40, "t2"), sent_mark(2)
    )
    redis_sync.rpush(jkey(dead, b), entry("jp", 1, 40, "t3"))
    BatchItem.objects.filter(batch=batch).update(claim_expires_at="2000-01-01T00:00:00Z")

    assert execution.requeue_expired_claims() == [str(batch.id)]
    a.refresh_from_db()
    b.refresh_from_db()
    assert (a.status, a.attempts, a.retry_extra_tokens) == (ItemStatus.PENDING, 2, 80)
    assert [(e["provider"], e["error_type"], e["detail"], e["used"]) for e in a.attempt_log] == [
        ("jp", "outcome_unknown", "outcome unknown (worker died)", False)
    ] * 2
    assert (b.attempts, b.attempt_log) == (0, [])  # never left: not counted
    assert redis_sync.exists(jkey(dead, a), jkey(dead, b)) == 0  # taken once: a second pass folds nothing
    assert journal.fold_unknown([(a.id, dead, str(batch.id), "a")]) == 0

    owner = execution.new_owner()
    retaken = {i.custom_id: i for i in claim(str(batch.id), owner=owner)}
    assert (
        execution.apply_results(
            str(batch.id), execution.as_served([(retaken["a"], ok("a")), (retaken["b"], ok("b"))]), owner
        ).written
        == 2
    )
    a.refresh_from_db()
    assert (a.status, a.attempts, a.retry_extra_tokens, len(a.attempt_log)) == (
        ItemStatus.SUCCEEDED,
        3,
        80,
        3,
    )
    stats, _ = execution.batch_stats(batch, 0)
    assert stats["providers"]["jp"]["request_count"] == 4  # 2 unknown + 1 + 1


def test_a_result_whose_claim_was_lost_still_counts_its_attempts(team, make_provider, redis_sync):
    make_provider("jp")
    batch = make_batch(team, [q("c", provider="jp")])
    slow = execution.new_owner()
    (item,) = claim(str(batch.id), owner=slow)
    redis_sync.rpush(
        jkey(slow, item), entry("jp", 1, 9, "t"), sent_mark(1), entry("jp", 2, 9, "t"), sent_mark(2)
    )
    # the slow slice's claim was lost: another slice took the item over and stored its own answer
    other = execution.new_owner()
    BatchItem.objects.filter(id=item.id).update(claimed_by=other)
    assert execution.apply_results(str(batch.id), execution.as_served([(item, ok("c"))]), other).written == 1
    # the slow slice's answer (2 attempts) cannot be applied: its attempts are appended, none used
    assert (
        execution.apply_results(
            str(batch.id), execution.as_served([(item, ok("c", attempts=2))]), slow
        ).written
        == 0
    )
    item.refresh_from_db()
    assert item.attempts == 3
    assert [(e["used"], e.get("detail", "")) for e in item.attempt_log] == [
        (True, ""),
        (False, journal.NOT_APPLIED),
        (False, journal.NOT_APPLIED),
    ]
    assert item.retry_extra_tokens == 10  # the two unused answers' tokens (5 each)


def test_a_slice_that_releases_a_sent_item_keeps_its_attempt(team, make_provider, redis_sync):
    make_provider("jp")
    batch = make_batch(team, [q("d", provider="jp")])
    owner = execution.new_owner()
    (item,) = claim(str(batch.id), owner=owner)
    redis_sync.rpush(jkey(owner, item), entry("jp", 1, 7, "t"), sent_mark(1))
    assert execution.release_claims(owner) == 1
    item.refresh_from_db()
    assert (item.status, item.attempts, item.attempt_log[0]["detail"]) == (
        ItemStatus.PENDING,
        1,
        journal.RELEASED,
    )


def test_claims_need_an_owner(team, make_provider):
    make_provider("jp")
    batch = make_batch(team, [q("e", provider="jp")])
    with pytest.raises(ValueError, match="owner"):
        claim(str(batch.id), owner="")
    with pytest.raises(ValueError, match="owner"):
        execution.release_claims("")


def test_a_note_is_one_script_call_that_pushes_and_sets_the_expiry_even_after_a_script_flush(redis_sync):
    """before_send: one EVALSHA (RPUSH + EXPIRE together); a flushed script cache is loaded again."""
    import asyncio

    from gateway_engine.items import WorkItem
    from gateway_engine.journal import RedisAttemptJournal
    from gateway_engine.quota.redis_store import RedisQuotaStore

    store = RedisQuotaStore(settings.REDIS_URL, prefix=settings.GATEWAY_REDIS_PREFIX)
    sent: list[str] = []
    command = store.command
    store.command = lambda *args: (sent.append(str(args[0])), command(*args))[1]  # type: ignore[method-assign]
    item = WorkItem("n1", [{"role": "user", "content": "x"}], batch_id="b-note")
    k = key(settings.GATEWAY_REDIS_PREFIX, "owner-n", "b-note", "n1")

    async def note(attempt: int) -> None:
        try:
            await RedisAttemptJournal(store, "owner-n", ttl_seconds=600).before_send(item, "p", attempt, 7)
        finally:
            await store.aclose()

    asyncio.run(note(1))
    assert sent == ["EVALSHA"]
    redis_sync.script_flush()
    asyncio.run(note(2))
    assert sent == ["EVALSHA", "EVALSHA", "EVAL"]  # the second found no script: EVAL loads it
    assert [json.loads(e)["attempt"] for e in redis_sync.lrange(k, 0, -1)] == [1, 2]
    assert 590 <= redis_sync.ttl(k) <= 600
    redis_sync.delete(k)
