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
