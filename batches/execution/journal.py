"""The attempt journal, Django side: which engine journal a slice uses, and folding a journal into the
item's record when nobody will store the answer of those attempts (gateway_engine.journal).

Every attempt is pushed to Redis before its request leaves. Then exactly one of these happens:

* the slice stores the item's result: the result carries those attempts; the list is deleted
  (``forget``, after the write commits);
* the slice cannot apply the result (its claim was lost): the attempts are taken from the list and
  their real log entries appended to the item (``fold_unapplied``), marked "result not applied";
* the item is given back without a result — released by its slice, its claim expired (worker
  died), or ended by a cancel/deadline sweep: the list is taken and each attempt appended as
  ``outcome_unknown`` ("outcome unknown (worker died)"), its reserved tokens counted in
  ``retry_extra_tokens`` (``fold_unknown``).

Taking is atomic (one Lua call reads and deletes), so an attempt is folded at most once however the
reconciler and a late slice race. The item's next result is written on top (``attempts`` and
``attempt_log`` add up, batches.execution.results), so RESULT.attempts and the batch's per-provider
``request_count`` count every request that left.

Single-process mode (no Redis) journals nothing: there the process is the whole system.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from typing import Any

from django.conf import settings

from gateway_engine.journal import NULL_JOURNAL, RedisAttemptJournal, key, split
from gateway_engine.protocols import AttemptJournal
from gateway_site.forksafe import ProcessLocal

log = logging.getLogger("batches.execution")

ERROR_TYPE = "outcome_unknown"
WORKER_DIED = "outcome unknown (worker died)"
RELEASED = "outcome unknown (its slice stopped before the answer was stored)"
NOT_APPLIED = "result not applied (the claim was lost before it was stored)"
RELEASED_AFTER_ATTEMPTS = (
    "released before its retry (its slice ended or the worker stopped); sent again later"
)
CHUNK = 500

# KEYS: journal lists. Returns, per key, its entries (possibly none); every key is deleted.
_TAKE_LUA = """
local out = {}
for i, k in ipairs(KEYS) do
  out[i] = redis.call('LRANGE', k, 0, -1)
  if #out[i] > 0 then redis.call('DEL', k) end
end
return out
"""

Row = tuple[str, str, str]  # (owner, batch_id, custom_id)


def enabled() -> bool:
    return settings.GATEWAY_QUOTA_BACKEND == "redis"


def _client():
    from gateway_site.redis import sync_redis

    return sync_redis(timeout=5)


_CLIENT = ProcessLocal(_client)


def shared_client():
    """This process's synchronous client of the shared Redis (one per process, made after a fork):
    the journal's, and the progress snapshot's turn (finalize.py)."""
    return _CLIENT.get()


def journal_for(owner: str) -> AttemptJournal:
    """The engine journal of one claim owner (one slice)."""
    if not enabled():
        return NULL_JOURNAL
    from gateway_engine.quota.redis_store import RedisQuotaStore
    from providers.limits import get_quota_store

    store = get_quota_store()
    if not isinstance(store, RedisQuotaStore):  # a test's local store with the redis backend named
        return NULL_JOURNAL
    return RedisAttemptJournal(store, owner)


def _key(owner: str, batch_id: str, custom_id: str) -> str:
    return key(settings.GATEWAY_REDIS_PREFIX, owner, str(batch_id), custom_id)


def take(rows: Sequence[Row]) -> list[list[dict[str, Any]]]:
    """Read and delete the journal lists of these (owner, batch, custom id) rows; entries per row."""
    if not enabled() or not rows:
        return [[] for _ in rows]
    client = _CLIENT.get()
    script = client.register_script(_TAKE_LUA)
    out: list[list[dict[str, Any]]] = []
    for i in range(0, len(rows), CHUNK):
        part = rows[i : i + CHUNK]
        lists = script(keys=[_key(*r) for r in part])
        out += [[json.loads(raw) for raw in entries] for entries in lists]
    return out


def forget(owner: str, items: Iterable[tuple[str, str]]) -> None:
    """The results of these (batch, custom id) items are stored: drop their journal lists. A failure
    only leaves lists that expire (nothing will fold them: the items are terminal)."""
    if not enabled():
        return
    keys = [_key(owner, b, c) for b, c in items]
    if not keys:
        return
    try:
        client = _CLIENT.get()
        for i in range(0, len(keys), CHUNK):
            client.unlink(*keys[i : i + CHUNK])
    except Exception as exc:  # noqa: BLE001 - the lists expire by themselves
        log.warning(
            "attempt journal: could not drop %d stored items' lists (%s); they expire", len(keys), exc
        )


def unknown_entry(taken: dict[str, Any], note: str) -> dict[str, Any]:
    """The attempt-log entry of a journalled attempt whose answer nobody stored."""
    return {
        "provider": taken.get("provider") or "?",
        "status_code": None,
        "error_type": ERROR_TYPE,
        "latency_ms": 0,
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "tokens": int(taken.get("tokens") or 0),
        "used": False,
        "at": taken.get("at") or "",
        "detail": note,
    }


def append_attempts(item_id: int, entries: list[dict[str, Any]]) -> None:
    """Add attempts to an item's record (inside the caller's transaction; the row is locked by it or
    locked here)."""
    from batches.models import BatchItem

    row = (
        BatchItem.objects.select_for_update()
        .only("id", "attempts", "retry_extra_tokens", "attempt_log")
        .get(id=item_id)
    )
    row.attempts += len(entries)
    row.retry_extra_tokens += sum(int(e.get("tokens") or 0) for e in entries if not e.get("used"))
    row.attempt_log = [*(row.attempt_log or []), *entries]
    row.save(update_fields=["attempts", "retry_extra_tokens", "attempt_log"])


def fold_unknown(rows: Sequence[tuple[int, str, str, str]], note: str = WORKER_DIED) -> int:
    """Items given back without a result: (item id, owner, batch id, custom id) with a non-empty owner.
    Their journalled attempts are appended as outcome unknown. Returns how many attempts were folded.
    Call inside the transaction that gives the rows back."""
    rows = [r for r in rows if r[1]]
    if not rows:
        return 0
    lists = take([(owner, str(b), c) for _, owner, b, c in rows])
    folded = 0
    for (item_id, owner, batch_id, custom_id), taken in zip(rows, lists, strict=True):
        attempts, marked = split(taken)
        left = [t for t in attempts if int(t.get("attempt") or 0) in marked]
        if len(left) < len(attempts):
            log.info(
                "batch %s item %s: %d journalled attempt(s) by %s never left (no sent mark)",
                batch_id, custom_id, len(attempts) - len(left), owner,
            )  # fmt: skip
        if left:
            append_attempts(item_id, [unknown_entry(t, note) for t in left])
            folded += len(left)
            log.warning(
                "batch %s item %s: %d attempt(s) by %s counted with %s",
                batch_id, custom_id, len(left), owner, note,
            )  # fmt: skip
    return folded


def fold_released(owner: str, batch_id: str, released: Sequence[tuple[Any, Any]]) -> int:
    """Items given back after attempts, while they waited out a breaker or a backoff (their slice
    ended, or the worker stopped): their attempts stay on the item, which is sent again later. From
    the journal (``fold_unapplied``); in single-process mode, which journals nothing, from the engine's
    own log of them."""
    if enabled():
        return fold_unapplied(owner, batch_id, released, note=RELEASED_AFTER_ATTEMPTS)
    folded = 0
    for item, result in released:
        entries = [dict(e, used=False, detail=RELEASED_AFTER_ATTEMPTS) for e in result.attempt_log or []]
        if entries:
            append_attempts(item.id, entries)
            folded += len(entries)
    return folded


def fold_unapplied(
    owner: str, batch_id: str, dropped: Sequence[tuple[Any, Any]], note: str = NOT_APPLIED
) -> int:
    """Results this owner could not apply (its claim was lost), or released after attempts (a shutdown
    stopped their retries): the attempts still in its journal are appended to the item with what the
    engine saw of them, none of them used. Returns how many."""
    if not dropped or not enabled():
        return 0
    lists = take([(owner, str(batch_id), item.custom_id) for item, _ in dropped])
    folded = 0
    for (item, result), taken in zip(dropped, lists, strict=True):
        attempts, marked = split(taken)
        log_entries_n = len(getattr(result, "attempt_log", None) or [])
        # an attempt with an answer in the result was sent, whatever its mark
        numbers = sorted(
            n for n in {int(t.get("attempt") or 0) for t in attempts} if n in marked or n <= log_entries_n
        )
        if not numbers:
            continue
        log_entries = list(getattr(result, "attempt_log", None) or [])
        entries = []
        for n in numbers:
            if 1 <= n <= len(log_entries):
                e = dict(log_entries[n - 1])
                e["used"], e["detail"] = False, note
                entries.append(e)
            else:  # journalled but the engine has no record of its answer
                entries.append(
                    unknown_entry(next(t for t in attempts if int(t.get("attempt") or 0) == n), note)
                )
        append_attempts(item.id, entries)
        folded += len(entries)
    return folded
