"""A continuously refilled token bucket (capacity = rate x burst), driven by an injectable clock."""

from __future__ import annotations

import math


class Bucket:
    """``rate`` units per real second, ``capacity`` units; starts full.

    ``try_take(n, now)`` either takes n units (returns 0.0) or takes nothing and returns the real
    seconds until n units will be available. A request larger than the capacity can never pass:
    ``math.inf`` is returned.
    """

    __slots__ = ("rate", "capacity", "level", "updated")

    def __init__(self, rate: float, capacity: float, now: float):
        if rate <= 0 or capacity <= 0:
            raise ValueError("rate and capacity must be positive")
        self.rate = rate
        self.capacity = capacity
        self.level = capacity
        self.updated = now

    def refill(self, now: float) -> None:
        if now > self.updated:
            self.level = min(self.capacity, self.level + (now - self.updated) * self.rate)
            self.updated = now

    def wait_for(self, n: float, now: float) -> float:
        self.refill(now)
        if n > self.capacity:
            return math.inf
        if self.level >= n:
            return 0.0
        return (n - self.level) / self.rate

    def take(self, n: float, now: float) -> None:
        self.refill(now)
        self.level -= n

    def reset_after(self, now: float) -> float:
        """Real seconds until the bucket is full again."""
        self.refill(now)
        return max(0.0, (self.capacity - self.level) / self.rate)
