"""The provider pause of a backend's buckets (billing exhausted, a per-day quota: every grant and lease
raises ProviderPaused until it ends or an operator lifts it): setting and lifting it, over the backend's
``set_pause`` / ``drop_pause`` primitives, waking this process's waiters (TokenBuckets mixes it in).

The local view (``hold_pauses``): the pauses this process was told of by the durable record (the gateway's
LimitsSource loads them from PostgreSQL with the live config, on every change announced on the config
channel). A grant checks it before the store (``refuse_if_held``), so a pause holds here even while the
store lost it (a Redis restart) until it is written back (``refill_pauses``); a pause that appears in
the view wakes this process's waiters of that provider, including items waiting out a Retry-After
(``wait_for_pause``)."""

from __future__ import annotations

import logging
import math
import time
from abc import abstractmethod
from collections.abc import Mapping

from .types import PauseState
from .wakeups import Wakeups

log = logging.getLogger("gateway_engine.quota.buckets")


class ProviderPauses:
    """``pause_provider`` and ``lift_provider_pause`` for a backend with ``set_pause`` / ``drop_pause``."""

    _sleepers: Wakeups
    _held: dict[str, PauseState] | None = None  # the local view (hold_pauses); None: never told

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
        self.notify_pause(provider)

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
        held = self._held
        if held is not None:
            held.pop(provider, None)
        self.notify_pause(provider)
        return lifted

    # ---- the local view of the durable record -----------------------------------------------------
    def hold_pauses(self, pauses: Mapping[str, PauseState]) -> None:
        """Replace the local view with ``pauses`` (every provider's durable pause); wake the waiters of
        every provider whose pause appeared, changed or went away, so they ask again now."""
        held, self._held = self._held or {}, dict(pauses)
        for provider in set(held) | set(pauses):
            if held.get(provider) != pauses.get(provider):
                self.notify_pause(provider)

    def held_pause(self, provider: str) -> PauseState | None:
        """The provider's pause in the local view, if it has not ended."""
        state = (self._held or {}).get(provider)
        if state is None or (state.until_epoch is not None and state.until_epoch <= time.time()):
            return None
        return state

    def refuse_if_held(self, provider: str) -> None:
        """ProviderPaused when the local view holds a pause of the provider (whatever the store says)."""
        state = self.held_pause(provider)
        if state is not None:
            raise state.refusal()

    async def refill_pauses(self) -> int:
        """Write the local view's pauses back into the store (after a Redis restart the store holds
        none; never shortening one it holds); how many it set."""
        count = 0
        for state in list((self._held or {}).values()):
            if self.held_pause(state.provider) is not None and await self.set_pause(state):
                count += 1
        return count

    def notify_pause(self, provider: str) -> None:
        """Wake this process's waiters of the provider (grants and ``wait_for_pause``)."""
        self._sleepers.notify_all(provider)
        self._sleepers.notify_all(_pause_key(provider))

    async def wait_for_pause(self, provider: str, timeout: float) -> bool:
        """Wait ``timeout`` seconds, or until a pause of the provider is set, changed or lifted in this
        process (its answer, or the durable record announced on the config channel): True if woken."""
        return await self._sleepers.wait(_pause_key(provider), timeout)


def _pause_key(provider: str) -> str:
    return f"{provider}\x00pause"
