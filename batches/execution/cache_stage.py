"""The response cache and in-flight dedup in batch execution (issue #25, docs/cache.md): claimed rows go
through ``CacheStage.divert`` before they reach the engine, and finished ones through ``after_store``.

* ``divert(rows)``: for each row the cache applies to (response_cache.policy: batch ``cache`` > route
  ``cache`` at temperature 0 > off), the route's providers are looked up in routing order; a hit is
  stored at once through the one result writer (``apply_results``, ``ServedBy.CACHE``: attempts 0,
  nothing billed, no quota). A miss is sent only if it leads its dedup key (identical items of the
  team: ``response_cache.keys.dedup_key``): the first of them in this claim, and only if no other
  owner leads that key (``response_cache.services.lead``, a row per key in PostgreSQL). The others
  wait here, still claimed by this owner, and are returned as not sent.
* ``after_store(pairs)``: a leader's successful answer is stored in the cache first, then its lead is
  released, then the followers waiting here get it as their own RESULT (``served_by: "cache"``).
* ``poll()`` (the dispatcher's housekeeping, about once a second): renews this owner's leads; a
  follower whose leader is elsewhere gets the cached answer once that leader has stored it.

The failure rule: a leader that ends without an answer (failed, released unsent, its worker died and
its lead expired after GATEWAY_CLAIM_LEASE_SECONDS) stores nothing; its followers are given back to the
queue (their claims released, no attempt counted) and are sent as ordinary items — one of them leads
the next round. So a follower never inherits a leader's error, and nothing waits on a dead leader
longer than a claim lease. Rows the cache does not apply to pass through untouched: sampling workloads
(temperature above 0 without ``cache: true``) are never deduplicated.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from batches.models import Batch, BatchItem
from gateway_engine.items import ItemResult
from gateway_engine.routing import RoutingError, RoutingTable, candidates, stable_draw
from response_cache import keys, policy, selectors, services

from .apply import apply_results
from .claims import release_claims
from .common import log
from .served import Served, ServedBy


@dataclass(frozen=True, slots=True)
class Cached:
    """What the cache needs of one row it applies to."""

    team_id: int
    team: str  # the team part of the keys ("" when teams share the cache)
    messages: list[Any]
    params: dict[str, Any]
    lookups: tuple[str, ...]  # cache keys of the route's providers, in routing order
    dedup: str


def hit_result(row: BatchItem, provider: str, answer: Mapping[str, Any]) -> ItemResult:
    """The RESULT of a row answered by a stored (or an identical item's) answer: no attempt, no latency."""
    return ItemResult(
        row.custom_id,
        "succeeded",
        provider=provider,
        attempts=0,
        latency_ms=0,
        served_by=str(ServedBy.CACHE),
        **{name: answer.get(name) for name in services.ANSWER_FIELDS},
    )


def answer_of(result: ItemResult) -> dict[str, Any]:
    return {name: getattr(result, name) for name in services.ANSWER_FIELDS}


class CacheStage:
    """The cache and dedup of one claim owner's run (a dispatcher slice)."""

    def __init__(self, table: RoutingTable, owner: str):
        self.table, self.owner = table, owner
        self.cached_routes = {r.route for r in table.rules if r.enabled and r.cache}
        self.shared = bool(settings.GATEWAY_CACHE_SHARED_ACROSS_TEAMS)
        self.lease = float(settings.GATEWAY_CLAIM_LEASE_SECONDS)
        self.batches: dict[str, tuple[bool | None, int]] = {}  # batch id → (its cache field, team id)
        self.sent: dict[int, Cached] = {}  # row id → what a row sent to the engine is cached under
        self.leading: set[str] = set()  # dedup keys this owner leads
        self.parked: dict[str, list[tuple[BatchItem, Cached]]] = {}  # dedup key → followers

    @property
    def waiting(self) -> int:
        return sum(len(rows) for rows in self.parked.values())

    # -- before the engine --

    def divert(self, rows: Sequence[BatchItem]) -> list[BatchItem]:
        """The rows to send (in order); the others were answered from the cache or wait for a leader."""
        infos = self.infos(rows)
        if not infos:
            return list(rows)
        entries = selectors.live_entries(k for info in infos.values() for k in info.lookups)
        hits: list[tuple[BatchItem, ItemResult]] = []
        misses: list[BatchItem] = []
        for row in rows:
            info = infos.get(row.id)
            if info is None:
                continue
            found = next((entries[k] for k in info.lookups if k in entries), None)
            if found is not None:
                hits.append((row, hit_result(row, found.provider, found.answer)))
            else:
                misses.append(row)
        self._serve(hits)
        send = self._lead(misses, infos)
        return [row for row in rows if row.id not in infos or row.id in send]

    def _lead(self, misses: list[BatchItem], infos: Mapping[int, Cached]) -> set[int]:
        first: dict[str, BatchItem] = {}
        for row in misses:
            first.setdefault(infos[row.id].dedup, row)
        won = services.lead([k for k in first if k not in self.leading], self.owner, self.lease)
        send: set[int] = set()
        for row in misses:
            info = infos[row.id]
            if first[info.dedup] is row and info.dedup in won:
                self.leading.add(info.dedup)
                self.sent[row.id] = info
                send.add(row.id)
            else:
                self.parked.setdefault(info.dedup, []).append((row, info))
        return send

    def infos(self, rows: Iterable[BatchItem]) -> dict[int, Cached]:
        rows = list(rows)
        missing = {str(r.batch_id) for r in rows} - set(self.batches)
        if missing:
            for bid, cache, team_id in Batch.objects.filter(id__in=missing).values_list(
                "id", "cache", "team_id"
            ):
                self.batches[str(bid)] = (cache, int(team_id))
        out = {}
        for row in rows:
            info = self._info(row)
            if info is not None:
                out[row.id] = info
        return out

    def _info(self, row: BatchItem) -> Cached | None:
        batch_cache, team_id = self.batches.get(str(row.batch_id), (False, 0))
        payload = row.payload or {}
        params = dict(payload.get("params") or {})
        route_cache = bool(row.route) and not row.requested_provider and row.route in self.cached_routes
        if not policy.applies(batch_cache, route_cache, params):
            return None
        try:
            order = candidates(
                self.table,
                route=row.route,
                provider=row.requested_provider,
                draw=stable_draw(str(row.batch_id), row.custom_id),
            )
        except RoutingError:
            return None  # the engine fails it as it would
        team = keys.team_part(team_id, self.shared)
        messages = keys.keyed_content(payload)
        lookups = tuple(
            keys.cache_key(team=team, provider=p.name, model=p.model, messages=messages, params=params)
            for p in order
        )
        target = f"provider:{row.requested_provider}" if row.requested_provider else f"route:{row.route}"
        dedup = keys.dedup_key(team=team, target=target, messages=messages, params=params)
        return Cached(team_id, team, messages, params, lookups, dedup)

    # -- after the engine --

    def after_store(self, pairs: Iterable[tuple[BatchItem, ItemResult]]) -> None:
        """Store the successful answers of rows this stage sent; serve or give back their followers."""
        new: list[services.NewEntry] = []
        ended: list[str] = []
        served: list[tuple[BatchItem, ItemResult]] = []
        give_back: list[int] = []
        done: list[int] = []  # forgotten only once everything below has succeeded (a retry redoes it)
        for row, result in pairs:
            info = self.sent.get(row.id)
            if info is None:
                continue
            done.append(row.id)
            ok = result.status == "succeeded" and result.provider in self.table.providers
            if ok:
                model = self.table.providers[result.provider].model
                key = keys.cache_key(
                    team=info.team, provider=result.provider, model=model,
                    messages=info.messages, params=info.params,
                )  # fmt: skip
                new.append(services.NewEntry(key, info.team_id, result.provider, answer_of(result)))
            if info.dedup in self.leading:
                ended.append(info.dedup)
                for follower, _ in self.parked.get(info.dedup, []):
                    if ok:
                        served.append((follower, hit_result(follower, result.provider, answer_of(result))))
                    else:
                        give_back.append(follower.id)
        services.store(new)  # first: the answer is visible before the lead ends
        services.release(ended, self.owner)
        self._serve(served)
        self._give_back(give_back)
        for row_id in done:
            self.sent.pop(row_id, None)
        for key in ended:
            self.leading.discard(key)
            self.parked.pop(key, None)

    def poll(self) -> None:
        """Renew this owner's leads; answer followers whose leader elsewhere has ended."""
        if self.leading:
            services.renew(self.owner, self.lease)
        remote = [k for k in self.parked if k not in self.leading]
        if not remote:
            return
        held = selectors.held_keys(remote)  # read before the entries: a leader stores, then releases
        ended = [k for k in remote if k not in held]
        if not ended:
            return
        waiting = [pair for k in ended for pair in self.parked.pop(k)]
        entries = selectors.live_entries(k for _, info in waiting for k in info.lookups)
        served, give_back = [], []
        for row, info in waiting:
            found = next((entries[k] for k in info.lookups if k in entries), None)
            if found is not None:
                served.append((row, hit_result(row, found.provider, found.answer)))
            else:
                give_back.append(row.id)
        self._serve(served)
        self._give_back(give_back)

    def _serve(self, pairs: list[tuple[BatchItem, ItemResult]]) -> None:
        by_batch: dict[str, list[Served]] = defaultdict(list)
        for row, result in pairs:
            by_batch[str(row.batch_id)].append(Served(row, result, ServedBy.CACHE))
        for bid, entries in by_batch.items():
            apply_results(bid, entries, self.owner)

    def _give_back(self, row_ids: list[int]) -> None:
        """Followers of a leader that ended without an answer: back to the queue, sent as usual."""
        if row_ids:
            released = release_claims(self.owner, row_ids)
            log.info("response cache: %d follower(s) of a leader without an answer queued again", released)
