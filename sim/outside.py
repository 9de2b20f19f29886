"""The outside client of a shared key (sim/shared_keys.py): traffic on the same key that does not come
through the gateway, driven by the simulator itself at ``rps`` requests per simulated second for
``duration_s`` simulated seconds. Each request takes 1 request and ``tokens`` tokens from the key's
buckets when they have them (``outside_ok``) and is turned away otherwise (``outside_429``), as the
provider would answer another client of the key."""

from __future__ import annotations

import asyncio

from sim.limits import Charge, Limits


class OutsideClient:
    def __init__(self, cfg, limits: Limits, time_scale: float):
        self.cfg = cfg  # sim.shared_keys.OutsideConfig
        self.limits = limits
        self.time_scale = time_scale
        self.sent = self.ok = self.rate_limited = 0
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self.run())

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    def counts(self) -> dict:
        return {"outside_sent": self.sent, "outside_ok": self.ok, "outside_429": self.rate_limited}

    def send(self, now: float) -> None:
        charge = Charge(1, self.cfg.tokens, self.cfg.tokens, 0)
        self.sent += 1
        if self.limits.check(charge, now) is None:
            self.limits.take(charge, now)
            self.ok += 1
        else:
            self.rate_limited += 1

    async def run(self) -> None:
        """Send the k-th request at start + k / rate (real seconds), catching up after a late wake-up."""
        loop = asyncio.get_running_loop()
        interval = 1.0 / (self.cfg.rps * self.time_scale)
        start = loop.time() + self.cfg.start_s / self.time_scale
        end = None if self.cfg.duration_s is None else start + self.cfg.duration_s / self.time_scale
        k = 0
        while end is None or start + k * interval < end:
            delay = start + k * interval - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            now = loop.time()
            while start + k * interval <= now and (end is None or start + k * interval < end):
                self.send(now)
                k += 1
