"""Token before lease, checked on the order of calls rather than on timings.

A spy wraps the in-process quota store and records, per engine task, every admit / acquire / try_lease /
try_global_slot / release / release_lease / wait_for_lease call. The engine's rule (docs/quota.md):
an attempt takes its bucket token and its provider lease in one atomic grant (store.admit: both, or —
every lease held — neither), with this process's in-flight slot held around each try; when something
after it is busy it gives everything back before it waits. So, for every attempt:
  * admit and acquire (which may wait for a token) are never called while the task holds a lease or a
    token, and try_lease (a lease apart from a grant) is never called at all;
  * a busy lease takes nothing: no release follows it, the task goes straight to wait_for_lease;
  * wait_for_lease / wait_for_global_slot are never called while the task holds a token.
If the engine took a lease first and then waited for a token while holding it, the first check fails on
the first attempt; if it took a token and gave it back for a busy lease (main before the ADMIT), the
second does.
"""

from __future__ import annotations

import asyncio
from collections import Counter, defaultdict

from gateway_engine import CrossProviderBatcher, EngineOptions
from gateway_engine.quota import LeaseBusy
from gateway_engine.quota.local import LocalQuotaStore
from gateway_engine.routing import ProviderConfig, routing_table

from .provider_server import ok_reply

ITEMS = 60
CONCURRENCY = 2  # far fewer leases than dispatchers: attempts find the lease busy and must give back


class SpyStore(LocalQuotaStore):
    """The real in-process store; records (task, call, result) per engine task and checks the rules
    as the calls happen, so a violation names the call that broke it."""

    def __init__(self, provider: str, **kw):
        super().__init__(**kw)
        self.provider = provider
        self.calls: list[tuple[int, str]] = []
        self.tokens: Counter[int] = Counter()  # tokens a task holds (acquired, not yet spent or given back)
        self.leases: Counter[int] = Counter()  # provider leases a task holds
        self.violations: list[str] = []

    def _task(self) -> int:
        return id(asyncio.current_task())

    def _mine(self, limits) -> bool:
        return limits.name == self.provider  # not the cluster-wide slot that try_global_slot uses inside

    def _check(self, ok: bool, what: str) -> None:
        if not ok:
            self.violations.append(f"{what} (call {len(self.calls)})")

    def _asking(self, limits, what: str) -> int:
        t = self._task()
        if self._mine(limits):
            self._check(self.leases[t] == 0 and self.tokens[t] == 0, f"{what} while holding a lease or token")
            self.calls.append((t, what))
        return t

    async def acquire(self, limits, tokens=0, *args, **kw):
        t = self._asking(limits, "acquire")
        reservation = await super().acquire(limits, tokens, *args, **kw)
        if self._mine(limits):
            self.tokens[t] += 1
            self.calls.append((t, "acquired"))
        return reservation

    async def admit(self, limits, tokens=0, **kw):
        t = self._asking(limits, "admit")
        try:
            granted = await super().admit(limits, tokens, **kw)
        except LeaseBusy:
            self.calls.append((t, "admit:busy"))
            raise
        if self._mine(limits):
            self.leases[t] += 1  # the token is spent on the send that follows at once (the slot came with it)
            self.calls.append((t, "admitted" if granted[2] is not None else "admitted:no-slot"))
        return granted

    async def release(self, limits, reservation):
        t = self._task()
        if self._mine(limits):
            self.calls.append((t, "release"))
            self._check(self.tokens[t] == 1, "release without a held token")
            self.tokens[t] -= 1
        await super().release(limits, reservation)

    async def try_lease(self, limits):
        t = self._task()
        lease = await super().try_lease(limits)
        if self._mine(limits):
            self._check(self.tokens[t] == 1, "try_lease without a token acquired first")
            self.calls.append((t, "try_lease:" + ("ok" if lease else "busy")))
            if lease is not None:
                self.leases[t] += 1
        return lease

    async def try_global_slot(self):
        t = self._task()
        self._check(self.tokens[t] == 1 and self.leases[t] == 1, "in-flight slot before token and lease")
        slot = await super().try_global_slot()
        self.calls.append((t, "try_global_slot:" + ("ok" if slot else "busy")))
        if slot is not None:
            self.tokens[t] -= 1  # the token is spent on this request
        return slot

    async def release_lease(self, limits, lease):
        t = self._task()
        if self._mine(limits):
            self.calls.append((t, "release_lease"))
            self.leases[t] -= 1
        await super().release_lease(limits, lease)

    async def wait_for_lease(self, limits):
        t = self._task()
        self._check(self.tokens[t] == 0, "waiting for a lease while holding a token")
        self._check(self.leases[t] == 0, "waiting for a lease while holding one")
        self.calls.append((t, "wait_for_lease"))
        await super().wait_for_lease(limits)

    async def wait_for_global_slot(self):
        t = self._task()
        self._check(self.tokens[t] == 0, "waiting for an in-flight slot while holding a token")
        self.calls.append((t, "wait_for_global_slot"))
        await super().wait_for_global_slot()


def test_every_attempt_takes_its_token_before_its_lease_and_never_waits_holding_either(provider_server):
    provider_server.behaviours["spy"] = lambda n, r, a, b: ok_reply(0.01)
    config = ProviderConfig.from_dict(
        {
            "name": "spy",
            "base_url": provider_server.url("spy"),
            "model": "spy-m",
            "rpm": 600_000,
            "tpm": 100_000_000,
            "max_concurrency": CONCURRENCY,
            "timeout_seconds": 5,
            "max_retries": 0,
        }
    )
    store = SpyStore("spy", global_max_in_flight=64)
    batcher = CrossProviderBatcher(
        routing_table([config]), store=store, options=EngineOptions(provider_workers_min=12, seed=1)
    )
    items = [{"custom_id": f"i{i}", "provider": "spy", "query": f"q{i}"} for i in range(ITEMS)]

    async def main():
        # "another worker" holds every lease when the batch starts (taken past the spy: not an engine
        # task); it lets go once engine tasks have found the lease busy and gone to wait for one
        limits = config.limits
        held = [await LocalQuotaStore.try_lease(store, limits) for _ in range(CONCURRENCY)]
        assert all(lease is not None for lease in held)
        run = asyncio.ensure_future(batcher.abatch(items))
        for _ in range(10_000):
            if sum(call == "wait_for_lease" for _, call in store.calls) >= 3 or run.done():
                break
            await asyncio.sleep(0.001)
        assert not run.done() and provider_server.count("spy") == 0
        for lease in held:
            await LocalQuotaStore.release_lease(store, limits, lease)
        try:
            return await asyncio.wait_for(run, 60)
        finally:
            await store.aclose()

    results = asyncio.run(main())

    assert all(r.ok for r in results), [r.as_result() for r in results if not r.ok][:3]
    assert store.violations == [], store.violations[:5]
    per_task: dict[int, list[str]] = defaultdict(list)
    for task, call in store.calls:
        per_task[task].append(call)
    sent = 0
    for calls in per_task.values():
        for i, call in enumerate(calls):
            assert not call.startswith(("try_lease", "acquire")), call  # the grant and lease: one admit
            if call == "admitted":
                assert calls[i - 1] == "admit", calls[max(0, i - 3) : i + 1]
            if call == "admit:busy":  # nothing taken: nothing to give back; the wait comes next
                assert calls[i + 1] == "wait_for_lease", calls[i : i + 3]
            sent += call == "admitted"
    assert sent == ITEMS == provider_server.count("spy")  # one request per item, each after its token
    # the contended path really ran: attempts found every lease held, and no token was given back
    tally = Counter(call for _, call in store.calls)
    assert tally["admit:busy"] > 0 and tally["wait_for_lease"] >= tally["admit:busy"]
    assert tally["release"] == tally["admitted:no-slot"] == tally["try_global_slot:busy"] == 0
    # never more than CONCURRENCY requests in flight at the provider
    assert provider_server.max_in_flight["spy"] <= CONCURRENCY
