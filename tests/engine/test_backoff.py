"""gateway_engine/backoff.py: the one capped exponential every growing wait uses."""

from __future__ import annotations

import pytest

from gateway_engine.backoff import capped_exponential
from gateway_engine.breaker import BreakerConfig
from gateway_engine.retry import RetryPolicy


@pytest.mark.parametrize(
    ("base", "cap", "step", "factor", "expected"),
    [
        (0.5, 30.0, 0, 2.0, 0.5),
        (0.5, 30.0, 3, 2.0, 4.0),
        (0.5, 30.0, 10, 2.0, 30.0),
        (0.5, 30.0, -2, 2.0, 0.5),  # a negative step counts as 0
        (10.0, 300.0, 2, 1.5, 22.5),
        (1.0, 60.0, 10**9, 2.0, 60.0),  # a huge step is the cap, not an overflow
    ],
)
def test_values(base, cap, step, factor, expected):
    assert capped_exponential(base, cap, step, factor) == pytest.approx(expected)


def test_the_retry_ceiling_and_the_breaker_cooldown_are_it():
    from gateway_engine.breaker import _cooldown_ms

    policy = RetryPolicy(base_seconds=0.25, cap_seconds=8.0)
    assert [policy.ceiling(n) for n in range(7)] == [0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 8.0]
    cfg = BreakerConfig(cooldown_seconds=5, max_cooldown_seconds=60)
    assert [_cooldown_ms(cfg, opens) for opens in (1, 2, 3, 4, 5)] == [5000, 10000, 20000, 40000, 60000]


def test_the_ladder_is_every_step_up_to_the_cap():
    from gateway_engine.backoff import ladder
    from gateway_engine.breaker import cooldown_ladder_ms

    assert ladder(5.0, 60.0) == (5.0, 10.0, 20.0, 40.0, 60.0)
    assert ladder(10.0, 10.0) == (10.0,)
    assert len(ladder(1e-9, 1e9)) <= 65  # bounded by MAX_STEP
    cfg = BreakerConfig(cooldown_seconds=0.25, max_cooldown_seconds=1.0)
    assert cooldown_ladder_ms(cfg) == (250.0, 500.0, 1000.0)


def test_the_redis_breaker_hands_its_script_the_python_ladder():
    from gateway_engine.breaker_redis import RedisBreaker

    breaker = RedisBreaker(
        "redis://127.0.0.1:1/0", config=BreakerConfig(cooldown_seconds=5, max_cooldown_seconds=60)
    )
    args = breaker._args("record", 0.0)
    assert args[5] == "5000.0,10000.0,20000.0,40000.0,60000.0" and args[6] == 60000.0


def test_an_overloaded_answer_backs_off_longer_than_a_server_error():
    """The policy is data: the error type's row names it, BACKOFF_POLICIES scales base and cap."""
    import random

    from gateway_engine.backoff import BACKOFF_POLICIES
    from gateway_engine.error_kinds import ERROR_KINDS
    from gateway_engine.retry import ErrorType

    policy = RetryPolicy(base_seconds=0.5, cap_seconds=30.0)
    overload = ERROR_KINDS[ErrorType.OVERLOADED].backoff
    server = ERROR_KINDS[ErrorType.SERVER_ERROR].backoff
    assert overload != server and overload in BACKOFF_POLICIES and server in BACKOFF_POLICIES
    assert [policy.ceiling(n, server) for n in range(8)] == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    assert [policy.ceiling(n, overload) for n in range(8)] == [2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0, 60.0]
    rng = random.Random(1)
    draws = [policy.backoff(n, rng, policy=overload) for n in range(8) for _ in range(50)]
    assert all(0.0 <= d <= 60.0 for d in draws) and max(draws) > 30.0  # full jitter, under the longer cap


def test_the_outage_ride_grows_through_the_helper():
    from gateway_engine.outage import OutageBackoff

    class Clock:
        now = 0.0

        def __call__(self) -> float:
            return self.now

    clock = Clock()
    backoff = OutageBackoff(100.0, min_delay=0.2, max_delay=2.0, clock=clock)
    delays = []
    for _ in range(6):
        delays.append(backoff.next_delay())
        clock.now += delays[-1] or 0.0
    assert delays == [capped_exponential(0.2, 2.0, n) for n in range(6)] == [0.2, 0.4, 0.8, 1.6, 2.0, 2.0]


def test_an_open_breaker_replaces_the_backoff():
    """The retry decision (waits.retry_delay): a failure that leaves the breaker open waits for the
    breaker (delay 0: the next pass finds it open and waits for its probe, or falls back), a pause goes
    to the next candidate at once, a believable Retry-After is taken, else the row's policy's jitter."""
    import random
    from types import SimpleNamespace

    from gateway_engine.recording import Failure
    from gateway_engine.retry import ErrorType
    from gateway_engine.waits import retry_delay

    retry = RetryPolicy(base_seconds=10.0, cap_seconds=10.0)
    ctx = SimpleNamespace(options=SimpleNamespace(retry=retry), rng=random.Random(3))
    state = SimpleNamespace(per_provider={"p": 1})
    choice = SimpleNamespace(name="p")

    def delay(error_type, failure, pause=None):
        outcome = SimpleNamespace(error_type=error_type, pause=pause)
        return retry_delay(ctx, state, choice, outcome, failure)  # type: ignore[arg-type]

    assert delay(ErrorType.OVERLOADED, Failure(None, breaker_open=True)) == 0.0
    # a call's own failure keeps its backoff under an open breaker (tests/faults/test_isolation.py: the
    # failing items spread out, and the breaker's probe goes to an item that has not failed there)
    draws = {delay(ErrorType.INVALID_RESPONSE, Failure(None, breaker_open=True)) for _ in range(50)}
    assert max(draws) > 0.0 and all(0 <= d <= 10.0 for d in draws)
    assert delay(ErrorType.SERVER_ERROR, Failure(None, breaker_open=False), pause=object()) == 0.0
    assert delay(ErrorType.RATE_LIMITED, Failure(2.5, breaker_open=False)) == 2.5
    draws = {delay(ErrorType.OVERLOADED, Failure(None, breaker_open=False)) for _ in range(50)}
    assert max(draws) > 10.0 and all(0 <= d <= 20.0 for d in draws)  # the overload policy: 4 × base, 2 × cap
    draws = {delay(ErrorType.SERVER_ERROR, Failure(None, breaker_open=False)) for _ in range(50)}
    assert all(0 <= d <= 10.0 for d in draws)
