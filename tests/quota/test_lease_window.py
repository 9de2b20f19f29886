"""The run's lease window (gateway_engine/quota/lease_window.py): halves on a refused lease, grows by one
per window of leases taken, FIFO, and a cancelled waiter never keeps a place."""

from __future__ import annotations

import asyncio

from gateway_engine.quota.lease_window import LeaseWindow


def test_a_lone_process_keeps_the_whole_cap_and_a_refusal_halves_it():
    w = LeaseWindow(32)
    for _ in range(100):
        w.lease_taken()
    assert w.size == 32
    w.lease_refused()
    w.lease_refused()
    assert w.size == 8
    for _ in range(8):  # one window of leases taken: one place more
        w.lease_taken()
    assert 8.9 < w.size < 9.1
    for _ in range(10):
        w.lease_refused()
    assert w.size == 1


def test_waiters_enter_in_order_as_places_free_and_when_the_window_grows():
    async def main():
        w = LeaseWindow(4)
        w.lease_refused()  # 2 places
        order: list[int] = []

        async def take(i):
            await w.acquire()
            order.append(i)

        tasks = [asyncio.create_task(take(i)) for i in range(5)]
        await asyncio.sleep(0)
        assert order == [0, 1] and w.in_use == 2
        w.release()
        await asyncio.sleep(0)
        assert order == [0, 1, 2]
        w.lease_taken()
        w.lease_taken()  # 2 → 2.5 → 2.9: not a new place yet
        await asyncio.sleep(0)
        assert order == [0, 1, 2]
        w.lease_taken()  # 3.24: a third place
        await asyncio.sleep(0)
        assert order == [0, 1, 2, 3] and w.in_use == 3
        tasks[4].cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return w

    w = asyncio.run(main())
    assert w.in_use == 3 and not w._waiters


def test_a_waiter_woken_and_cancelled_at_once_hands_its_place_on():
    async def main():
        w = LeaseWindow(1)
        await w.acquire()
        first = asyncio.create_task(w.acquire())
        second = asyncio.create_task(w.acquire())
        await asyncio.sleep(0)
        w.release()  # first is counted in ...
        first.cancel()  # ... and cancelled before it ran
        await asyncio.gather(first, return_exceptions=True)
        await asyncio.wait_for(second, 1)
        return w

    assert asyncio.run(main()).in_use == 1
