"""Items waiting out an open breaker, woken in this process the moment a probe here closes it.

Without this, an item that never failed at the provider polled the half-open breaker like every other
waiter, and the provider's poisoned items (the ones that opened it) could win the race after the probe
closed it and open it again before the well-formed ones were sent (docs/engine.md, "Failure
isolation"). Only items with no failure at the provider wait here; the ones that failed there keep
polling (with the probe deferral of ``waits.py``), so the closed breaker goes to the likely-good work
first. Other processes learn of the close at their next poll (``HALF_OPEN_POLL_SECONDS``)."""

from __future__ import annotations

from .quota.wakeups import Wakeups

_WAKES = Wakeups()


async def wait_for_close(provider: str, timeout: float) -> bool:
    """Wait ``timeout`` seconds, or until a probe in this process closed ``provider``'s breaker (True)."""
    return await _WAKES.wait(provider, timeout)


def probe_succeeded(provider: str) -> None:
    """A half-open probe to ``provider`` came back healthy here: wake its local breaker waiters."""
    _WAKES.notify_all(provider)
