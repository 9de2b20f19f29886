"""The provider pause of a backend's buckets (billing exhausted, a per-day quota: every grant and lease
raises ProviderPaused until it ends or an operator lifts it): setting and lifting it, over the backend's
``set_pause`` / ``drop_pause`` primitives, waking this process's waiters (TokenBuckets mixes it in)."""

from __future__ import annotations

import logging
import math
import time
from abc import abstractmethod

from .types import PauseState
from .wakeups import Wakeups

log = logging.getLogger("gateway_engine.quota.buckets")


class ProviderPauses:
    """``pause_provider`` and ``lift_provider_pause`` for a backend with ``set_pause`` / ``drop_pause``."""

    _sleepers: Wakeups

    @abstractmethod
    async def set_pause(self, pause: PauseState) -> bool: ...

    @abstractmethod
    async def drop_pause(self, provider: str) -> bool: ...

    async def pause_provider(
        self, provider: str, reason: str, until_epoch: float | None = None, message: str = ""
    ) -> None:
        """Pause the provider for every worker: every grant and lease raises ProviderPaused until
        ``until_epoch`` (wall-clock seconds; None: until lift_provider_pause). Never shortens a pause that
        lasts longer. A waiter of this process is woken to see it now (others: on their next try)."""
        if not reason:
            raise ValueError(f"pause_provider({provider!r}): reason must be a non-empty string")
        if until_epoch is not None and not math.isfinite(until_epoch):
            raise ValueError(f"pause_provider({provider!r}): until_epoch must be finite, got {until_epoch}")
        pause = PauseState(provider, reason, until_epoch, message, since_epoch=time.time())
        if await self.set_pause(pause):
            log.warning(
                "provider %s paused (%s) %s",
                provider,
                reason,
                "until cleared" if until_epoch is None else f"until epoch {until_epoch:.0f}",
                extra={"event": "provider_pause_set", "provider": provider, "reason": reason},
            )
        self._sleepers.notify_all(provider)

    async def lift_provider_pause(self, provider: str) -> bool:
        """Lift the provider's pause (an operator's action); True if one held. Wakes this process's
        waiters so they ask again now."""
        lifted = await self.drop_pause(provider)
        if lifted:
            log.info(
                "provider %s pause lifted",
                provider,
                extra={"event": "provider_pause_lifted", "provider": provider},
            )
        self._sleepers.notify_all(provider)
        return lifted
