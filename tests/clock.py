"""A fake monotonic clock for timing rules: pass it as `clock=` to LocalQuotaStore, LocalBreaker or
LimitsSource and step it; the test then checks the rule exactly, with no real sleep and no margin."""

from __future__ import annotations


class FakeClock:
    """Callable like time.monotonic (seconds). Starts at an arbitrary non-zero time."""

    def __init__(self, start: float = 1000.0) -> None:
        self.t = start

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        assert seconds >= 0, "a monotonic clock never goes back"
        self.t += seconds

    def advance_ms(self, ms: float) -> None:
        self.advance(ms / 1000.0)
