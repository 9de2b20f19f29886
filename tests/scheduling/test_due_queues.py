"""The due-work driver (batches/execution/due.py): the reconciler kicks a registered queue when its
next row is due within one pass, with the countdown to that row, and never lets one broken queue stop
the others."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from batches.execution import due, reconcile


@pytest.fixture
def queues(monkeypatch):
    """An empty registry for the test (the apps' own queues are put back afterwards)."""
    monkeypatch.setattr(due, "_queues", {})
    return due


def test_a_queue_due_within_the_pass_is_kicked_with_the_countdown_to_its_row(queues, settings):
    settings.GATEWAY_CLAIM_LEASE_SECONDS = 30.0  # horizon 10 s
    now = timezone.now()
    kicks: dict[str, list[float]] = {"soon": [], "later": [], "empty": [], "late": []}
    plan = {"soon": now + dt.timedelta(seconds=4), "later": now + dt.timedelta(seconds=60), "empty": None,
            "late": now - dt.timedelta(seconds=5)}  # fmt: skip
    for name, when in plan.items():
        queues.register(due.DueQueue(name, lambda when=when: when, kicks[name].append))
    assert sorted(queues.kick_due(now)) == ["late", "soon"]
    assert kicks == {"soon": [4.0], "later": [], "empty": [], "late": [0.0]}


def test_a_broken_queue_is_logged_and_the_others_still_run(queues, caplog):
    kicked: list[float] = []

    def broken():
        raise RuntimeError("table missing")

    queues.register(due.DueQueue("broken", broken, kicked.append))
    queues.register(due.DueQueue("fine", lambda: timezone.now() - dt.timedelta(seconds=1), kicked.append))
    assert queues.kick_due() == ["fine"]
    assert kicked == [0.0]
    assert "due queue broken: kick failed" in caplog.text


@pytest.mark.django_db
def test_every_reconciler_pass_kicks_the_due_queues(queues):
    kicked: list[float] = []
    queues.register(due.DueQueue("polls", lambda: timezone.now() - dt.timedelta(seconds=1), kicked.append))
    report = reconcile(lambda: None)
    assert report["due"] == ["polls"]
    assert kicked == [0.0]
    assert queues.kick_now("polls") and kicked == [0.0, 0.0]
    assert queues.kick_now("nothing-here") is False
