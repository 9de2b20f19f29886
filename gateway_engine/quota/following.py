"""Shared keys: what the token buckets do with an answer's remaining-quota headers (docs/quota.md "Shared
keys"), as a base of ``buckets.TokenBuckets``: the check every backend shares, and the atomic primitive
each implements (the ADAPT script of lua_adaptive.py, the in-process cell of adaptive.py)."""

from __future__ import annotations

from abc import ABC, abstractmethod

from .adaptive import RemainingQuota
from .types import ProviderLimits, Reservation


class RemainingFollower(ABC):
    """Applies believable remaining-quota reports of adaptive providers to their buckets."""

    @abstractmethod
    async def follow(
        self, limits: ProviderLimits, sent_mark: tuple[int, int] | None, quota: RemainingQuota
    ) -> None:
        """Apply an answer's (checked) remaining quota to the RPM / TPM buckets, atomically (adaptive.py:
        the level at most what is left, the refill at most what is left over the time to the reset)."""

    async def follow_remaining(
        self, limits: ProviderLimits, reservation: Reservation | None, quota: RemainingQuota
    ) -> bool:
        """An answer's remaining-quota headers (docs/quota.md "Shared keys"), for every worker: until the
        reset, each reported dimension refills at min(configured, (remaining − sent since the request) /
        seconds to the reset) and holds at most that remainder. Ignored unless the (live) limits are
        ``adaptive``; a value that is not finite, negative or above the configured limits changes nothing
        (the caller logs it). True if something was applied."""
        if reservation is not None and reservation.current is not None:
            limits = reservation.current()
        checked = quota.checked(limits)
        if not limits.adaptive or checked.empty:
            return False
        await self.follow(limits, None if reservation is None else reservation.sent_mark, checked)
        return True
