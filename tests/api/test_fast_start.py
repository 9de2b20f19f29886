"""A submission itself starts the dispatch (issue #19): with workers, the POST's commit queues
`batches.dispatch` tasks when fewer than GATEWAY_DISPATCHERS are alive — no wait for `start_batch` to
reach a free worker child or for the reconciler's next pass. (The time it saves is measured in
bench/first_request.py, not here.)"""

from __future__ import annotations

import pytest
from django.conf import settings

from batches import tasks
from batches.execution import DispatcherSet

from .helpers import item, post_json

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def broker_calls(monkeypatch, settings):
    """Worker mode in this process, with the broker replaced by a list of what would be sent."""
    settings.CELERY_TASK_ALWAYS_EAGER = False
    settings.GATEWAY_BACKGROUND_EAGER = False
    settings.GATEWAY_DISPATCHERS = 3
    sent: list[tuple[str, str]] = []
    monkeypatch.setattr(tasks.dispatch, "delay", lambda token: sent.append(("dispatch", token)))
    monkeypatch.setattr(tasks.start_batch, "delay", lambda bid: sent.append(("start_batch", bid)))
    return sent


def test_the_post_enqueues_the_dispatchers_before_start_batch(
    client, routes, api_key, broker_calls, redis_sync
):
    response = post_json(client, {"items": [item(0), item(1)]})
    assert response.status_code == 201, response.content
    kinds = [kind for kind, _ in broker_calls]
    assert kinds == ["dispatch", "dispatch", "dispatch", "start_batch"]
    assert broker_calls[-1][1] == response.json()["id"]
    # the tokens are the live dispatcher set's: a second POST with 3 alive queues no more dispatchers
    assert DispatcherSet().live() == 3
    assert post_json(client, {"items": [item(2)]}).status_code == 201
    assert [kind for kind, _ in broker_calls[4:]] == ["start_batch"]


def test_a_broker_outage_leaves_the_batch_stored_for_the_reconciler(
    client, routes, api_key, broker_calls, monkeypatch, redis_sync
):
    def down(token):
        raise ConnectionError("broker down")

    monkeypatch.setattr(tasks.dispatch, "delay", down)
    response = post_json(client, {"items": [item(0)]})
    assert response.status_code == 201 and response.json()["status"] == "queued"
    assert DispatcherSet().live() == 0  # a token whose task could not be sent is not counted
    assert settings.GATEWAY_DISPATCHERS == 3
