"""Routing by capacity: a provider whose queue is drained and which has room serves the waiting items of
a held-back peer of the same priority in the same route, instead of leaving them to wait out their
weighted draw (issue #40).

An item is queued at submission behind its weighted first choice (``routing.preferred_provider``). A
slice checks, at most every ``CHECK_SECONDS``, each provider ``P`` that has no queued work of its own
(it was left out of the last ``queued_work`` read) and buffer room in this slice; for each peer ``Q``
that shares a first priority tier with ``P`` in some route (``routing.first_tier_peers``) and still
has queued work, it reads the live state of both (one quota-store snapshot, one breaker snapshot):

* ``P`` has room: no pause, no 429 pause, breaker not open, a free lease (``leases_in_flight <
  max_concurrency``) and its bucket grants a request now (``wait_ms == 0``);
* ``Q`` is held back — the signal, in this order:
  ``paused`` (a provider pause or a 429 pause holds), ``breaker_open``, or ``saturated`` (every lease
  in use — a slow answer rate — or its bucket makes the next request wait, ``wait_ms > 0`` — its quota
  spent, by the gateway or outside use). ``paused`` and ``breaker_open`` move any waiting item;
  ``saturated`` only items submitted at least ``GATEWAY_CAPACITY_MOVE_WAIT_SECONDS`` ago.

Then ``P`` claims up to its buffer's room of ``Q``'s pending items of those routes (team by fair
queuing on ``P``'s clock, batches in lane order; never an item with an explicit provider, nor an
embeddings item when ``P`` serves none): ``claims.claim_moved`` queues them for ``P`` and names ``Q``
in ``BatchItem.moved_from``; the engine tries ``P`` first (``WorkItem.prefer``), the rest of the
fallback order unchanged. RESULT carries ``"routed_by": {"rule": P, "reason": "capacity", "moved_from":
Q}``; ``gateway_capacity_moves_total{provider, from_provider}`` counts the moves
(``observers.record_moves``). While both have room nothing moves: the weights decide the split.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from batches.models import BatchItem
from gateway_engine.errors import Unavailable
from gateway_engine.kinds import embeddings_api
from gateway_engine.redis_errors import REDIS_ERRORS
from gateway_engine.routing import RoutingTable, first_tier_peers

from . import observers
from .claims import Move, claim_moved
from .common import log

CHECK_SECONDS = 0.5  # how often a slice looks for a move (each look: two snapshots of the live state)
PAUSED, BREAKER_OPEN, SATURATED = "paused", "breaker_open", "saturated"  # why a peer is held back
REASON = "capacity"  # routed_by.reason of a moved item


@dataclass(frozen=True)
class LiveState:
    """What the quota store and the breaker say of some providers right now."""

    quota: dict[str, Any]  # name → ProviderQuotaState
    breakers: dict[str, dict]  # name → breaker state as a dict

    def has_room(self, name: str) -> bool:
        q = self.quota.get(name)
        if q is None or self.breakers.get(name, {}).get("state") == "open":
            return False
        free_lease = q.max_concurrency <= 0 or q.leases_in_flight < q.max_concurrency
        return q.pause is None and q.paused_until_ms <= 0 and q.wait_ms <= 0 and free_lease

    def held_back(self, name: str) -> str | None:
        """Why ``name`` is held back (PAUSED, BREAKER_OPEN, SATURATED), or None: it has room."""
        q = self.quota.get(name)
        if q is None:
            return None
        if q.pause is not None or q.paused_until_ms > 0:
            return PAUSED
        if self.breakers.get(name, {}).get("state") == "open":
            return BREAKER_OPEN
        if (q.max_concurrency > 0 and q.leases_in_flight >= q.max_concurrency) or q.wait_ms > 0:
            return SATURATED
        return None


def read_live(table: RoutingTable, names: list[str]) -> LiveState:
    from providers.limits.factory import snapshot_all_sync
    from providers.shared_breaker import breaker_snapshot_sync

    limits = [table.providers[n].limits for n in names]
    quota = {s.provider: s for s in snapshot_all_sync(limits)}
    return LiveState(quota, breaker_snapshot_sync(names))


# the slice's claim loop: (provider whose buffer the rows join, its teams' work, how many, claim) → claimed
ClaimLoop = Callable[[str, dict, int, Callable[[list[str], int, str], list[BatchItem]]], int]


class CapacityMoves:
    """One slice's capacity moves (see the module docstring)."""

    def __init__(self, table: RoutingTable) -> None:
        self.table = table
        self.peers = {name: first_tier_peers(table, name) for name in table.providers}
        self.peers = {name: peers for name, peers in self.peers.items() if peers}
        self.next_check = 0.0
        self.wait = timedelta(seconds=float(settings.GATEWAY_CAPACITY_MOVE_WAIT_SECONDS))

    def fill(self, work: dict, room: Callable[[str], int], claim_loop: ClaimLoop, owner: str) -> int:
        """Move what drained providers with room can take from held-back peers; returns how many."""
        now = time.monotonic()
        if not self.peers or now < self.next_check:
            return 0
        self.next_check = now + CHECK_SECONDS
        idle = [p for p in self.peers if p not in work and room(p) > 0]
        pairs = [(p, q) for p in idle for q in self.peers[p] if q in work]
        if not pairs:
            return 0
        try:
            live = read_live(self.table, sorted({n for pair in pairs for n in pair}))
        except (*REDIS_ERRORS, Unavailable) as exc:  # no live state: no move this round (nothing lost)
            log.warning("capacity moves skipped: the live provider state is unreadable (%s)", exc)
            return 0
        moved = 0
        for p, q in pairs:
            signal = live.held_back(q)
            want = room(p)
            if signal is None or want <= 0 or not live.has_room(p):
                continue
            move = Move(
                provider=p,
                peer=q,
                routes=self.peers[p][q],
                waited_since=timezone.now() - self.wait if signal == SATURATED else None,
                embeddings=embeddings_api(self.table.providers[p].kind) is not None,
            )
            n = claim_loop(p, dict(work[q]), want, self.claimer(move, owner))
            if n:
                log.info("capacity move: %d item(s) of %s (%s) to %s", n, q, signal, p)
                observers.record_moves(p, q, n)
                moved += n
        return moved

    @staticmethod
    def claimer(move: Move, owner: str) -> Callable[[list[str], int, str], list[BatchItem]]:
        return lambda order, size, _team: claim_moved(move, order, size, owner)
