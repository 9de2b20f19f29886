"""One exactly-once assertion for every test (and benchmark) that runs batches against real servers.

    from tests.exactly_once import assert_exactly_once, counts_since

    summary = assert_exactly_once([batch.id], [sim])            # sim: a sim.testing.SimHandle
    fresh = counts_since(broken)        # before the batches: a server the module's tests share
    ...run b1 and b2...
    summary = assert_exactly_once([b1, b2], [sim, provider_server, fresh])

``servers`` are objects with ``request_counts() -> {provider: {request_id: requests}}``: the simulator's
``SimHandle`` (``GET /_sim/requests``), ``tests.engine.provider_server.ProviderServer`` and
``tests.faults.server.BrokenProvider`` (whose providers are its modes). Each counts every request that
reached a chat route, whatever the answer, by its ``X-Request-ID`` header — the gateway sends the item's
custom_id there (gateway_engine/http.py).

What the database says the gateway sent must be what the providers saw:

(a) per custom_id of the batches: the requests all providers saw with that id (fallbacks included) ==
    the sum of ``BatchItem.attempts`` of that custom_id over the batches;
(b) per provider: the requests it saw with these batches' custom ids == the sum over the batches of
    ``Batch.stats["providers"][p]["request_count"]`` (missing = 0).

One exception, for tests that kill -9 a worker: an attempt the killed process had handed to the kernel
may never be read by the server (the kill resets the connection, and Linux drops what the peer had not
read yet), so the record may hold one attempt more than the server saw — recorded as "outcome unknown
(worker died)", which is what the gateway can know. ``may_be_unseen`` names the custom ids where that is
allowed (the killed process's in-flight items): for them seen == attempts or attempts − 1, and (b)
becomes: request_count − seen, summed over the providers, == the number of such unseen attempts, with
no provider's request_count below what it saw. The summary's ``unseen`` counts them.

Requests whose id is not a custom id of these batches (other batches', "" = no header) are left out;
``strict=True`` fails on them too. Every provider the batches sent to must be served by one of
``servers`` (a provider nobody counts saw 0). A server shared by several tests (the fault suite's module
fixture) is read relative to a snapshot taken before the batches ran (``counts_since(server)``, as above)
or is ``reset()`` first (SimHandle, BrokenProvider). Call it once the batches have ended: a request still
in flight is counted by its server but not yet in the item's ``attempts``.

Provider batches (issue #23): a server with ``batch_lines() -> {provider: {line custom id: lines}}`` (the
simulator's ``GET /_sim/batch_lines``) also counts the lines of the provider batches it was sent. A line's
custom id is the gateway's own (``<chunk>-<n>``, provider_batches.models.ProviderBatch): it is mapped to its
item's custom_id and counted as one request of that item, so (a) and (b) hold for items served by a
provider batch (one line = one attempt) and for items that went back to real time after one — the
batch-API HTTP calls (upload, create, polls, downloads) are not requests of any item and are left out.

Returns a summary: ``{"batches", "items", "items_sent", "requests", "duplicates" (requests beyond one
per custom id that was sent), "by_provider": {p: requests}, "other_requests"}``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any, Protocol

SHOW = 10  # custom ids listed in a failure message


class CountsRequests(Protocol):
    def request_counts(self) -> dict[str, dict[str, int]]: ...


class counts_since:  # noqa: N801 - reads as a function at the call site
    """A server's request counts minus those it had when this was made (for servers shared by tests)."""

    def __init__(self, server: CountsRequests):
        self.server = server
        self.baseline = {p: dict(ids) for p, ids in server.request_counts().items()}

    def request_counts(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for provider, ids in self.server.request_counts().items():
            base = self.baseline.get(provider, {})
            diff = {rid: n - base.get(rid, 0) for rid, n in ids.items() if n != base.get(rid, 0)}
            if diff:
                out[provider] = diff
        return out


def merged_counts(servers: Iterable[CountsRequests]) -> dict[str, Counter]:
    """{provider: Counter(request_id -> requests)} summed over the servers."""
    out: dict[str, Counter] = {}
    for server in servers:
        for provider, ids in server.request_counts().items():
            out.setdefault(provider, Counter()).update(ids)
    return out


def batch_line_counts(servers: Iterable[Any], batch_ids: list[str]) -> dict[str, Counter]:
    """{provider: Counter(item custom_id -> provider-batch lines)} for these batches' provider batches,
    from every server that counts batch lines."""
    from batches.models import BatchItem
    from provider_batches.models import ProviderBatch

    chunks = dict(ProviderBatch.objects.filter(batch_id__in=batch_ids).values_list("id", "item_ids"))
    if not chunks:
        return {}
    wanted = {i for ids in chunks.values() for i in ids}
    custom = dict(BatchItem.objects.filter(id__in=wanted).values_list("id", "custom_id"))
    out: dict[str, Counter] = {}
    for server in servers:
        counter = getattr(server, "batch_lines", None)
        if counter is None:
            continue
        for provider, lines in counter().items():
            for line_id, n in lines.items():
                chunk, _, index = str(line_id).rpartition("-")
                item_ids = chunks.get(chunk)
                if item_ids is None or not index.isdigit() or int(index) >= len(item_ids):
                    continue
                out.setdefault(provider, Counter())[custom[item_ids[int(index)]]] += n
    return out


def _batch_pk(batch: Any) -> str:
    return str(getattr(batch, "pk", batch))


def assert_exactly_once(
    batch_ids: Iterable[Any],
    servers: Iterable[CountsRequests],
    *,
    strict: bool = False,
    may_be_unseen: Iterable[str] = (),
) -> dict[str, Any]:
    """Assert (a) and (b) above for these batches (ids or Batch objects); return the summary."""
    from batches.models import Batch, BatchItem

    ids = sorted({_batch_pk(b) for b in batch_ids})
    assert ids, "assert_exactly_once: no batches given"
    stats_rows = dict(Batch.objects.filter(pk__in=ids).values_list("pk", "stats"))
    missing = sorted(set(ids) - {str(pk) for pk in stats_rows})
    assert not missing, f"assert_exactly_once: no such batch: {missing}"

    attempts: Counter = Counter()
    items = 0
    for custom_id, n in BatchItem.objects.filter(batch_id__in=ids).values_list("custom_id", "attempts"):
        attempts[custom_id] += n
        items += 1
    recorded: Counter = Counter()  # per provider: the stats' request_count summed over the batches
    for stats in stats_rows.values():
        for provider, row in ((stats or {}).get("providers") or {}).items():
            recorded[provider] += int((row or {}).get("request_count") or 0)

    servers = list(servers)
    seen = merged_counts(servers)
    for provider, lines in batch_line_counts(servers, ids).items():
        seen.setdefault(provider, Counter()).update(lines)
    per_id: dict[str, Counter] = {}  # custom_id -> Counter(provider -> requests)
    by_provider: Counter = Counter()
    other: Counter = Counter()  # (provider, request_id) of requests that are not these batches'
    for provider, counts in seen.items():
        for rid, n in counts.items():
            if not n:
                continue
            if rid in attempts:
                per_id.setdefault(rid, Counter())[provider] += n
                by_provider[provider] += n
            else:
                other[(provider, rid)] += n

    seen_total = {cid: sum(per.values()) for cid, per in per_id.items()}
    unseen_ok = set(may_be_unseen)
    unseen = {
        cid: 1 for cid in unseen_ok if attempts[cid] >= 1 and seen_total.get(cid, 0) == attempts[cid] - 1
    }
    wrong_ids = [
        cid
        for cid in sorted(set(attempts) | set(per_id))
        if seen_total.get(cid, 0) != attempts[cid] and cid not in unseen
    ]
    providers = sorted(set(recorded) | set(by_provider))
    if unseen:  # which provider an unseen attempt went to is not known: the totals must add up
        wrong_providers = [p for p in providers if recorded[p] < by_provider[p]]
        if sum(recorded.values()) - sum(by_provider.values()) != len(unseen):
            wrong_providers = providers
    else:
        wrong_providers = [p for p in providers if by_provider[p] != recorded[p]]
    requests = sum(by_provider.values())
    summary = {
        "batches": len(ids),
        "items": items,
        "items_sent": len(per_id),
        "requests": requests,
        "duplicates": requests - len(per_id),
        "by_provider": dict(sorted(by_provider.items())),
        "other_requests": sum(other.values()),
        "unseen": len(unseen),
    }
    if wrong_ids or wrong_providers or (strict and other):
        lines = [f"exactly-once check failed for {len(ids)} batch(es), {items} items, {requests} requests:"]
        if wrong_ids:
            lines.append(
                f"  {len(wrong_ids)} custom id(s) where the providers' requests != the items' attempts"
                f" (first {min(SHOW, len(wrong_ids))}):"
            )
            for cid in wrong_ids[:SHOW]:
                where = ", ".join(f"{p} {n}" for p, n in sorted(per_id.get(cid, Counter()).items()))
                lines.append(
                    f"    {cid!r}: seen {seen_total.get(cid, 0)}" + (f" ({where})" if where else "")
                    + f" vs attempts {attempts[cid]}"
                )  # fmt: skip
        lines.append("  per provider, requests seen vs stats request_count:")
        for p in providers:
            mark = "   <-- differs" if p in wrong_providers else ""
            lines.append(f"    {p}: seen {by_provider[p]} vs request_count {recorded[p]}{mark}")
        if strict and other:
            shown = ", ".join(f"{p}/{rid!r} ×{n}" for (p, rid), n in sorted(other.items())[:SHOW])
            lines.append(f"  strict: {sum(other.values())} request(s) with ids of no given batch: {shown}")
        raise AssertionError("\n".join(lines))
    return summary
