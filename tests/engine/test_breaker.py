"""The circuit breaker state machine: timing rules on a fake clock (LocalBreaker), the same machine in
the real Redis with sleeps and margins that hold on a loaded machine."""

import asyncio
import time
import uuid

import pytest
from django.conf import settings

from gateway_engine.breaker import BreakerConfig, LocalBreaker
from gateway_engine.breaker_redis import KNOWN_CLOSED_SECONDS, RedisBreaker
from tests.clock import FakeClock

CFG = BreakerConfig(
    consecutive_failures=3,
    window_seconds=5,
    min_requests=6,
    failure_ratio=0.5,
    cooldown_seconds=0.3,
    max_cooldown_seconds=0.5,
)


@pytest.fixture(params=["local", "redis"])
def breaker(request, redis_sync):
    if request.param == "local":
        return LocalBreaker(CFG)
    return RedisBreaker(settings.REDIS_URL, prefix=settings.GATEWAY_REDIS_PREFIX + "brk:", config=CFG)


def run(coro):
    return asyncio.run(coro)


def test_opens_on_consecutive_failures_then_half_open_probe_then_closes_on_a_fake_clock():
    """The timing rules exactly, on the in-process breaker with a fake clock (no sleeps)."""
    clock = FakeClock()
    breaker = LocalBreaker(CFG, clock=clock)

    async def scenario():
        p = "alpha"
        for _ in range(2):
            assert await breaker.record(p, ok=False) == "closed"
        assert (await breaker.allow(p)).allowed
        assert await breaker.record(p, ok=False) == "open"
        refused = await breaker.allow(p)
        assert not refused.allowed and refused.wait_seconds == pytest.approx(0.3)
        clock.advance(0.299)
        assert not (await breaker.allow(p)).allowed  # still open 1 ms before the cooldown ends
        clock.advance(0.001)
        probe = await breaker.allow(p, probe_ttl_seconds=5)
        assert probe.allowed and probe.probe and probe.state == "half_open"
        second = await breaker.allow(p, probe_ttl_seconds=5)
        assert not second.allowed and second.wait_seconds == pytest.approx(5.0)  # one probe at a time
        # probe fails → open again, cooldown doubled (0.6 capped at 0.5)
        assert await breaker.record(p, ok=False) == "open"
        assert (await breaker.allow(p)).wait_seconds == pytest.approx(0.5)
        clock.advance(0.5)
        assert (await breaker.allow(p, probe_ttl_seconds=5)).probe
        assert await breaker.record(p, ok=True) == "closed"
        assert (await breaker.allow(p)).allowed
        # another provider is independent
        assert (await breaker.allow("beta")).allowed
        view = breaker.snapshot_sync(["alpha", "beta"])
        assert view["alpha"].state == "closed" and view["alpha"].opened_count == 0

    run(scenario())


def test_a_lost_probe_lets_the_next_one_through_after_its_ttl_on_a_fake_clock():
    clock = FakeClock()
    breaker = LocalBreaker(CFG, clock=clock)

    async def scenario():
        for _ in range(3):
            await breaker.record("p", ok=False)
        clock.advance(0.3)
        assert (await breaker.allow("p", probe_ttl_seconds=2)).probe  # this probe never reports back
        clock.advance(1.999)
        assert not (await breaker.allow("p", probe_ttl_seconds=2)).allowed
        clock.advance(0.001)
        assert (await breaker.allow("p", probe_ttl_seconds=2)).probe

    run(scenario())


def test_redis_breaker_opens_probes_and_closes(redis_sync):
    """The same machine in Redis (its clock is the server's TIME): waits are slept out in full, only
    upper bounds and lower bounds with ≥ 0.5 s of slack are asserted, so a loaded machine passes."""
    cfg = BreakerConfig(consecutive_failures=3, window_seconds=30, min_requests=6, cooldown_seconds=0.5,
                        max_cooldown_seconds=2.0)  # fmt: skip
    breaker = RedisBreaker(settings.REDIS_URL, prefix=settings.GATEWAY_REDIS_PREFIX + "brk1:", config=cfg)

    async def scenario():
        p = "alpha"
        for _ in range(2):
            assert await breaker.record(p, ok=False) == "closed"
        assert await breaker.record(p, ok=False) == "open"
        refused = await breaker.allow(p)
        assert not refused.allowed and 0 < refused.wait_seconds <= 0.5
        await asyncio.sleep(refused.wait_seconds + 0.05)
        probe = await breaker.allow(p, probe_ttl_seconds=30)
        assert probe.allowed and probe.probe and probe.state == "half_open"
        assert not (await breaker.allow(p, probe_ttl_seconds=30)).allowed  # one probe at a time
        started = time.monotonic()
        assert await breaker.record(p, ok=False) == "open"  # probe failed: cooldown doubled to 1 s
        refused = await breaker.allow(p)
        elapsed = time.monotonic() - started  # ≥ the server time between the two calls
        assert breaker.snapshot_sync([p])[p].opened_count == 2
        # wait = cooldown − time since the failure: ≤ 1 s, and 1 s once that time is added back (a
        # 0.5 s cooldown passes only if the machine stalled ≥ 0.5 s between the calls)
        assert refused.wait_seconds <= 1.0 and refused.wait_seconds + elapsed >= 1.0 - 0.005
        await asyncio.sleep(refused.wait_seconds + 0.05)
        assert (await breaker.allow(p, probe_ttl_seconds=30)).probe
        assert await breaker.record(p, ok=True) == "closed"
        assert (await breaker.allow(p)).allowed and (await breaker.allow("beta")).allowed
        view = breaker.snapshot_sync(["alpha", "beta"])
        assert view["alpha"].state == "closed" and view["alpha"].opened_count == 0
        await breaker.aclose()

    run(scenario())


def test_opens_on_failure_ratio_in_window(breaker):
    async def scenario():
        p = "gamma"
        # alternate ok/fail: never 3 in a row, but 3 of 6 failed = ratio 0.5 at min_requests 6
        states = []
        for i in range(6):
            states.append(await breaker.record(p, ok=i % 2 == 1))
        assert states[:-1] == ["closed"] * 5
        assert states[-1] == "closed"  # 6th call is ok: 3/6 failed but the check runs on failures
        assert await breaker.record(p, ok=False) == "open"  # 4/7 ≥ 0.5
        snap = breaker.snapshot_sync([p])[p]
        assert snap.state == "open" and snap.open_remaining_ms > 0
        await breaker.aclose()

    run(scenario())


def test_retry_after_lengthens_but_never_shortens_an_open_cooldown_on_a_fake_clock():
    clock = FakeClock()
    breaker = LocalBreaker(CFG, clock=clock)

    async def scenario():
        p = "delta"
        for _ in range(3):
            await breaker.record(p, ok=False, retry_after_seconds=0.0)
        assert (await breaker.allow(p)).wait_seconds == pytest.approx(0.3)
        clock.advance(0.1)
        await breaker.record(p, ok=False, retry_after_seconds=0.05)  # shorter: ignored
        assert (await breaker.allow(p)).wait_seconds == pytest.approx(0.2)
        await breaker.record(p, ok=False, retry_after_seconds=2.0)  # longer: extends
        assert (await breaker.allow(p)).wait_seconds == pytest.approx(2.0)

    run(scenario())


def test_redis_retry_after_lengthens_but_never_shortens_an_open_cooldown(redis_sync):
    cfg = BreakerConfig(consecutive_failures=3, cooldown_seconds=10.0, max_cooldown_seconds=10.0)
    breaker = RedisBreaker(settings.REDIS_URL, prefix=settings.GATEWAY_REDIS_PREFIX + "brk3:", config=cfg)

    async def scenario():
        p = "delta"
        for _ in range(3):
            await breaker.record(p, ok=False, retry_after_seconds=0.0)
        assert 5 < (await breaker.allow(p)).wait_seconds <= 10
        await breaker.record(p, ok=False, retry_after_seconds=0.05)  # shorter: ignored
        assert (await breaker.allow(p)).wait_seconds > 5
        await breaker.record(p, ok=False, retry_after_seconds=30.0)  # longer: extends
        assert 25 < (await breaker.allow(p)).wait_seconds <= 30
        await breaker.aclose()

    run(scenario())


def test_redis_breaker_is_shared_between_instances(redis_sync):
    prefix = settings.GATEWAY_REDIS_PREFIX + "brk2:"
    a = RedisBreaker(settings.REDIS_URL, prefix=prefix, config=CFG)
    b = RedisBreaker(settings.REDIS_URL, prefix=prefix, config=CFG)

    async def scenario():
        for _ in range(3):
            await a.record("shared", ok=False)
        assert not (await b.allow("shared")).allowed
        await a.aclose()
        await b.aclose()

    run(scenario())
    assert b.snapshot_sync(["shared"])["shared"].state == "open"


def test_redis_breaker_takes_hundreds_of_concurrent_calls(redis_sync):
    """One multiplexed connection per loop: no connection-pool ceiling (redis-py's default is 100)."""
    breaker = RedisBreaker(settings.REDIS_URL, prefix=settings.GATEWAY_REDIS_PREFIX + "many:", config=CFG)

    async def scenario():
        permits = await asyncio.gather(*(breaker.allow(f"p{i % 7}") for i in range(400)))
        states = await asyncio.gather(*(breaker.record(f"p{i % 7}", ok=True) for i in range(400)))
        await breaker.aclose()
        return permits, states

    permits, states = run(scenario())
    assert all(p.allowed for p in permits) and set(states) == {"closed"}


def test_the_redis_breaker_walks_the_python_cooldown_ladder(redis_sync):
    """The Lua script has no cooldown formula: each re-open takes the next step of the ladder Python
    computed (``cooldown_ladder_ms``), and stays at its last step beyond it. Read exactly from the
    stored state (an open sets ``win_start`` to the same server time it adds the cooldown to)."""
    from gateway_engine.breaker import cooldown_ladder_ms
    from gateway_engine.breaker_redis import breaker_key

    cfg = BreakerConfig(consecutive_failures=1, cooldown_seconds=0.05, max_cooldown_seconds=0.2)
    prefix = settings.GATEWAY_REDIS_PREFIX + "brk-ladder:"
    breaker = RedisBreaker(settings.REDIS_URL, prefix=prefix, config=cfg)
    ladder = cooldown_ladder_ms(cfg)
    assert ladder == (50.0, 100.0, 200.0)

    async def scenario():
        periods = []
        assert await breaker.record("p", ok=False) == "open"
        for _ in range(4):
            open_until, opened_at = redis_sync.hmget(breaker_key(prefix, "p"), "open_until", "win_start")
            periods.append(float(open_until) - float(opened_at))
            while not (await breaker.allow("p", probe_ttl_seconds=5)).probe:
                await asyncio.sleep(0.02)
            assert await breaker.record("p", ok=False) == "open"  # the probe failed: re-opened
        await breaker.aclose()
        return periods

    assert run(scenario()) == [50.0, 100.0, 200.0, 200.0]


class CountingBreaker(RedisBreaker):
    """The real Redis breaker, counting the script calls it sends (allow and record alike)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.calls = 0

    async def _eval(self, provider, args):
        self.calls += 1
        return await super()._eval(provider, args)


def test_a_breaker_opened_by_another_worker_is_honoured_here_once_the_known_closed_bound_passed(redis_sync):
    prefix = f"{settings.GATEWAY_REDIS_PREFIX}brk-known:{uuid.uuid4().hex[:8]}:"
    clock = FakeClock()
    here = CountingBreaker(settings.REDIS_URL, prefix=prefix, config=CFG, clock=clock)
    other = RedisBreaker(settings.REDIS_URL, prefix=prefix, config=CFG)  # another worker process

    async def scenario():
        assert await here.record("p", ok=True) == "closed" and here.calls == 1  # this process learns "closed"
        for _ in range(3):
            await other.record("p", ok=False)
        assert other.snapshot_sync(["p"])["p"].state == "open"
        assert (await here.allow("p")).allowed and here.calls == 1  # within the bound: answered here
        clock.advance(KNOWN_CLOSED_SECONDS)
        refused = await here.allow("p")  # the bound passed: Redis is asked, the open breaker honoured
        assert not refused.allowed and refused.state == "open" and here.calls == 2
        assert not (await here.allow("p")).allowed and here.calls == 3  # open: always asked
        await here.aclose()
        await other.aclose()

    run(scenario())


def test_an_outcome_recorded_here_learns_an_open_breaker_at_once(redis_sync):
    prefix = f"{settings.GATEWAY_REDIS_PREFIX}brk-known:{uuid.uuid4().hex[:8]}:"
    clock = FakeClock()
    here = CountingBreaker(settings.REDIS_URL, prefix=prefix, config=CFG, clock=clock)
    other = RedisBreaker(settings.REDIS_URL, prefix=prefix, config=CFG)

    async def scenario():
        assert await here.record("p", ok=True) == "closed"
        for _ in range(3):
            await other.record("p", ok=False)
        # a late success of a call sent before the open: the answer says "open", the knowledge goes
        assert await here.record("p", ok=True) == "open"
        assert not (await here.allow("p")).allowed  # asked at once, no bound to wait out
        await here.aclose()
        await other.aclose()

    run(scenario())


def test_successful_calls_cost_one_breaker_script_each_not_two(redis_sync):
    prefix = f"{settings.GATEWAY_REDIS_PREFIX}brk-known:{uuid.uuid4().hex[:8]}:"
    clock = FakeClock()
    breaker = CountingBreaker(settings.REDIS_URL, prefix=prefix, config=CFG, clock=clock)
    calls = 50

    async def scenario():
        for _ in range(calls):
            assert (await breaker.allow("p")).allowed
            clock.advance(0.01)  # the call
            assert await breaker.record("p", ok=True) == "closed"
        await breaker.aclose()

    run(scenario())
    assert breaker.calls == calls + 1  # the first allow asks; every success renews "closed" (was 2 × calls)


def test_a_success_folded_into_the_settle_is_recorded_once_in_one_round_trip(redis_sync):
    from gateway_engine.quota.redis_store import RedisQuotaStore
    from tests.quota.conftest import make_limits

    prefix = f"{settings.GATEWAY_REDIS_PREFIX}brk-fold:{uuid.uuid4().hex[:8]}:"
    store = RedisQuotaStore(settings.REDIS_URL, prefix=prefix, global_max_in_flight=4)
    breaker = CountingBreaker(settings.REDIS_URL, prefix=prefix, config=CFG, clock=FakeClock())
    limits = make_limits(rpm=600, tpm=60_000)

    async def scenario():
        for _ in range(2):
            await breaker.record(limits.name, ok=False)  # 2 of 3 failures: a success must reset them
        reservation, lease, slot = await store.admit(limits, 100)
        await store.release_global_slot(slot)
        await store.release_lease(limits, lease)
        answer = await store.reconcile(limits, reservation, 40, also=breaker.success_part(limits.name))
        assert breaker.learn_folded(limits.name, answer) == "closed"
        sent = breaker.calls
        assert await breaker.record(limits.name, ok=True) == "closed" and breaker.calls == sent  # not re-sent
        view = breaker.snapshot_sync([limits.name])[limits.name]
        assert view.consecutive_failures == 0 and view.window_requests == 3  # the fold counted once
        assert (await store.snapshot(limits)).tpm_tokens_available == pytest.approx(960, abs=5)
        assert await breaker.record(limits.name, ok=True) == "closed" and breaker.calls == sent + 1
        await store.aclose()
        await breaker.aclose()

    run(scenario())
