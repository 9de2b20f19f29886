"""The attempt journal: every attempt noted before its request leaves (``protocols.AttemptJournal``).

Two notes per attempt: ``before_send`` (awaited: Redis has it before the request leaves) and ``sent``
(fire-and-forget, from the HTTP layer once the request's headers are written to the connection). A
folded attempt counts only with its ``sent`` mark, so a worker killed between the two (waiting for a
connection, say) does not count a request the provider never saw. What is left: a kill in the
moment between the request's write and the mark's (one event-loop turn) under-counts that one
request. Everything else is counted exactly.

An attempt whose answer is never stored (a worker killed mid-call, a slice that stopped on an error,
a claim lost to an expired lease) would otherwise be invisible: billed by the provider, missing from
the RESULT's ``attempts`` and the batch's ``request_count``. The Redis journal keeps one list per
(claim owner, batch, custom id): ``RPUSH`` of one JSON entry per attempt, sent before the HTTP request;
whoever gives the item back (the reconciler for a dead owner, the slice itself on release or on a
result it could not apply) takes the list and folds it into the item's record; a stored result
deletes it (``batches.execution.journal``).

Layout (``key(prefix, owner, batch_id, custom_id)``)::

    <prefix>j:{<owner>}:<batch_id>:<custom_id>  →  list of '{"provider","attempt","tokens","at"}'
                                                     and '{"sent": attempt}' marks

Each list expires after ``ttl_seconds`` (a safety net for a key whose owner and reconciler both
vanished); a live item's list is refreshed by every attempt.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from typing import TYPE_CHECKING, Any

from redis.exceptions import NoScriptError

from .items import WorkItem

if TYPE_CHECKING:
    from .quota.redis_store import RedisQuotaStore

DEFAULT_TTL_SECONDS = 7 * 24 * 3600
# one round trip and one command per note: the entry pushed and the list's expiry refreshed together
NOTE_SCRIPT = "redis.call('RPUSH', KEYS[1], ARGV[1]) return redis.call('EXPIRE', KEYS[1], ARGV[2])"
NOTE_SHA = hashlib.sha1(NOTE_SCRIPT.encode()).hexdigest()
log = logging.getLogger("gateway_engine.journal")


def key(prefix: str, owner: str, batch_id: str, custom_id: str) -> str:
    """The journal list of one item under one claim owner (the owner is a hash tag: one slot)."""
    return f"{prefix}j:{{{owner}}}:{batch_id}:{custom_id}"


def entry(provider: str, attempt: int, tokens: int, at: str) -> str:
    return json.dumps({"provider": provider, "attempt": attempt, "tokens": tokens, "at": at})


def sent_mark(attempt: int) -> str:
    return json.dumps({"sent": attempt})


def split(entries: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], set[int]]:
    """A taken list → (its attempt entries, one per attempt number, the last noted — an attempt is noted
    again when its item goes round without sending, e.g. to the next provider —, and the attempt
    numbers marked sent)."""
    last: dict[int, dict[str, Any]] = {}
    for e in entries:
        if "sent" not in e:
            last[int(e.get("attempt") or 0)] = e
    marked = {int(e["sent"]) for e in entries if "sent" in e}
    return [last[n] for n in sorted(last)], marked


def _now_iso() -> str:
    now = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1e6):06d}Z"


class NullJournal:
    """Notes nothing (plain-Python use and single-process mode, where the process is the whole system)."""

    async def before_send(self, item: WorkItem, provider: str, attempt: int, est_tokens: int) -> None:
        return None

    def sent(self, item: WorkItem, attempt: int) -> None:
        return None


class RedisAttemptJournal:
    """The journal of one claim owner (one dispatcher slice) in the quota store's Redis: one pipelined
    ``RPUSH`` + ``EXPIRE`` per attempt (one script: NOTE_SCRIPT) on the store's connection of the running
    loop, and the ``sent`` mark's ``RPUSH``."""

    def __init__(self, store: RedisQuotaStore, owner: str, *, ttl_seconds: int = DEFAULT_TTL_SECONDS):
        if not owner:
            raise ValueError("RedisAttemptJournal needs the claim owner")
        self.store = store
        self.owner = owner
        self.ttl_seconds = int(ttl_seconds)

    async def before_send(self, item: WorkItem, provider: str, attempt: int, est_tokens: int) -> None:
        k = key(self.store.prefix, self.owner, item.batch_id, item.custom_id)
        args = (k, entry(provider, attempt, est_tokens, _now_iso()), str(self.ttl_seconds))
        try:
            await self.store.command("EVALSHA", NOTE_SHA, 1, *args)
        except NoScriptError:  # a restarted or flushed Redis: EVAL loads it again
            await self.store.command("EVAL", NOTE_SCRIPT, 1, *args)

    def sent(self, item: WorkItem, attempt: int) -> None:
        k = key(self.store.prefix, self.owner, item.batch_id, item.custom_id)
        try:
            reply = self.store.client().call("RPUSH", k, sent_mark(attempt))
        except Exception as exc:  # noqa: BLE001 - never fail the request for its mark
            log.warning(
                "attempt journal: could not mark %s attempt %d sent (%s)", item.custom_id, attempt, exc
            )
            return
        reply.add_done_callback(_consume)


def _consume(reply: object) -> None:
    """Retrieve a fire-and-forget reply's exception (else asyncio logs 'never retrieved')."""
    exc = reply.exception() if not reply.cancelled() else None  # type: ignore[attr-defined]
    if exc is not None:
        log.warning("attempt journal: a sent mark was lost (%s)", exc)


NULL_JOURNAL = NullJournal()
