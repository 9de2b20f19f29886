"""A running dispatcher slice's periodic chores (batches.execution.dispatcher): renewing its claims,
checking for cancels, housekeeping and the dispatcher's heartbeat, each when it is due."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings

from .claims import renew_claims
from .common import log, ride_through

HOUSEKEEPING_SECONDS = 1.0
CANCEL_POLL_SECONDS = 0.5
HEARTBEAT_SECONDS = 2.0


@dataclass
class Chores:
    """A running slice's periodic chores and when each is next due (monotonic seconds): renewing its
    claims, checking for cancels, housekeeping and the dispatcher's heartbeat (the last three at once)."""

    slice: Any  # the DispatchSlice (dispatcher.py imports this module)
    renew: float
    cancel: float = 0.0
    house: float = 0.0
    beat: float = 0.0

    def run_due(self, now: float) -> None:
        s = self.slice
        if now >= self.renew:
            ride_through("renew claims", lambda: renew_claims(s.owner))
            self.renew = now + float(settings.GATEWAY_CLAIM_LEASE_SECONDS) / 3
        if now >= self.cancel:
            ride_through("check cancels", s.check_cancels)
            self.cancel = now + CANCEL_POLL_SECONDS
        if now >= self.house:
            ride_through("housekeeping", s.housekeeping)
            self.house = now + HOUSEKEEPING_SECONDS
        if s.heartbeat is not None and now >= self.beat:
            try:
                s.heartbeat()
            except Exception:  # noqa: BLE001 - a missed heartbeat only risks an extra dispatcher
                log.warning("dispatcher heartbeat failed", exc_info=True)
            self.beat = now + HEARTBEAT_SECONDS
