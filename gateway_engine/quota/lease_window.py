"""A run's window on one provider's concurrency leases: how many of its items may be between "asking the
bucket" and "answer in" at once, sized like a TCP congestion window from what the shared leases say.

The provider's leases are shared by every worker process; each process only knows its own items. With a
fixed local limit of ``max_concurrency``, N processes put N × max_concurrency items at the bucket for
max_concurrency leases, and most admissions were a bucket token taken, a lease refused and the token
given back (three store round trips for nothing: 2 of every 3 admissions on the 10,000-item batch path,
docs/benchmarks.md). The window starts at ``max_concurrency`` (a lone process never sees a refusal and
keeps it), halves on a refused lease and grows by one per window of leases taken, so each process
settles near its share of the cap and refusals become rare. Leases stay the only guarantee of the cap;
the window only decides how often this process asks. Nothing is held while waiting here.
"""

from __future__ import annotations

import asyncio
from collections import deque


class LeaseWindow:
    """An asyncio semaphore whose size follows lease refusals (AIMD between 1 and ``ceiling``)."""

    def __init__(self, ceiling: int) -> None:
        self.ceiling = max(1, int(ceiling))
        self.size = float(self.ceiling)
        self.in_use = 0
        self._waiters: deque[asyncio.Future[None]] = deque()

    def _room(self) -> bool:
        return self.in_use < int(self.size)

    async def acquire(self) -> None:
        """Wait (FIFO) until the window has room, then take a place in it."""
        if self._room() and not self._waiters:
            self.in_use += 1
            return
        fut = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        try:
            await fut  # the releaser counted us in (``_wake``)
        except BaseException:
            if fut.done() and not fut.cancelled():
                self.release()  # woken and cancelled at once: the place goes to the next waiter
            elif fut in self._waiters:
                self._waiters.remove(fut)
            raise

    def release(self) -> None:
        self.in_use -= 1
        self._wake()

    def lease_refused(self) -> None:
        """A lease was refused: other processes hold the rest of the cap. Halve (not below 1)."""
        self.size = max(1.0, self.size / 2)

    def lease_taken(self) -> None:
        """A lease was taken: grow by one place per window of leases (up to ``ceiling``)."""
        if self.size < self.ceiling:
            self.size = min(float(self.ceiling), self.size + 1.0 / self.size)
            self._wake()

    def _wake(self) -> None:
        while self._waiters and self._room():
            fut = self._waiters.popleft()
            if not fut.done():
                self.in_use += 1
                fut.set_result(None)
