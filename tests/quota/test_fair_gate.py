"""The interactive lane's fair queue (gateway_engine/quota/fair_gate.py) on its own: which team's call
gets the asking turn, in what order — the order is the property, recorded and asserted."""

from __future__ import annotations

import asyncio

import pytest

from gateway_engine.quota.fair_gate import FairGate, TeamPlace, TeamWaitingLimit


async def _served(gate: FairGate, waiters: list[TeamPlace], *, capacity: int = 1) -> list[str]:
    """Every waiter in ``waiters`` (queued in that order behind one caller already asking) takes its
    turn and sends at once; → the teams in the order they got the turn."""
    order: list[str] = []
    first = gate.try_enter(TeamPlace("x"), capacity)
    assert first is not None

    async def one(place: TeamPlace) -> None:
        seat = await gate.wait(place, capacity)
        order.append(place.team)
        gate.sent(seat)
        await asyncio.sleep(0)
        gate.close(seat)

    tasks = [asyncio.ensure_future(one(p)) for p in waiters]
    await asyncio.sleep(0)
    gate.sent(first)
    gate.close(first)
    await asyncio.gather(*tasks)
    return order


def test_a_burst_of_one_team_lets_another_teams_calls_through_in_turn():
    async def run():
        gate = FairGate("p", {})
        return await _served(gate, [TeamPlace("a")] * 200 + [TeamPlace("b")] * 5)

    order = asyncio.run(run())
    positions = [i for i, t in enumerate(order) if t == "b"]
    assert positions == [1, 3, 5, 7, 9], positions  # a, b, a, b, …: one of A's turns per one of B's


def gaps(order: list[str]) -> list[int]:
    """How many of the other teams' turns came between two of B's."""
    b = [i for i, t in enumerate(order) if t == "b"]
    return [j - i - 1 for i, j in zip(b, b[1:], strict=False)]


def test_weights_and_the_share_cap_set_the_turns():
    async def run(a: TeamPlace):
        return await _served(FairGate("p", {}), [a] * 40 + [TeamPlace("b")] * 5)

    weighted = asyncio.run(run(TeamPlace("a", weight=4)))
    capped = asyncio.run(run(TeamPlace("a", weight=4, share=0.5)))
    assert gaps(weighted) == [4, 4, 4, 4], weighted  # four of A's turns per one of B's
    assert gaps(capped) == [1, 1, 1, 1], capped  # at most half while B waits


def test_a_team_waiting_only_on_its_share_gives_its_turn_away():
    async def run():
        gate = FairGate("p", {})
        order: list[str] = []
        seat_a = gate.try_enter(TeamPlace("a"), 4)
        b = asyncio.ensure_future(gate.wait(TeamPlace("b"), 4))
        await asyncio.sleep(0)
        capped = asyncio.ensure_future(gate.step_aside(seat_a, 0.05))  # A's share bucket: 50 ms
        seat_b = await b
        order.append("b")
        gate.sent(seat_b)
        await capped
        order.append("a")
        return order, seat_a.state

    assert asyncio.run(run()) == (["b", "a"], "asking")


def test_the_waiting_limit_refuses_one_more_and_a_cancelled_waiter_leaves_no_turn_behind():
    async def run():
        waiting: dict[str, int] = {}
        gate = FairGate("p", waiting)
        first = gate.try_enter(TeamPlace("a"), 1)
        place = TeamPlace("a", max_waiting=2)
        w1 = asyncio.ensure_future(gate.wait(place, 1))
        w2 = asyncio.ensure_future(gate.wait(place, 1))
        await asyncio.sleep(0)
        with pytest.raises(TeamWaitingLimit, match="max_waiting_calls 2"):
            await gate.wait(place, 1)
        assert waiting == {"a": 2}
        w1.cancel()
        await asyncio.sleep(0)
        gate.close(first)  # the turn goes to w2, not to the cancelled w1
        seat = await w2
        assert (gate.asking, waiting) == (1, {})
        gate.close(seat)
        return gate.asking, gate.queued()

    assert asyncio.run(run()) == (0, 0)
