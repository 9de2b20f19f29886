"""POST /api/v1/batches with Idempotency-Key: a client retry never makes a second batch (#13)."""

from __future__ import annotations

import json
import threading

import pytest
from django.db import connection
from rest_framework.test import APIClient

from batches.models import Batch, BatchItem

pytestmark = pytest.mark.django_db

URL = "/api/v1/batches"


def body(n: int = 2) -> str:
    return json.dumps({"items": [{"custom_id": f"c{i}", "route": "intent", "query": "hi"} for i in range(n)]})


def post(client, data, key=None, content_type="application/json", url=URL):
    headers = {"HTTP_IDEMPOTENCY_KEY": key} if key is not None else {}
    return client.generic("POST", url, data, content_type=content_type, **headers)


def test_same_key_same_body_returns_the_first_batch(client, route):
    first = post(client, body(), key="order-42")
    assert first.status_code == 201
    again = post(client, body(), key="order-42")
    assert again.status_code == 200
    assert again.json()["id"] == first.json()["id"]
    assert Batch.objects.count() == 1 and BatchItem.objects.count() == 2
    stored = Batch.objects.get()
    assert stored.idempotency_key == "order-42" and len(stored.request_hash) == 64


def test_same_key_other_body_is_409_and_stores_nothing(client, route):
    first = post(client, body(2), key="k1")
    conflict = post(client, body(3), key="k1")
    assert conflict.status_code == 409
    error = conflict.json()["errors"][0]
    assert error["field"] == "Idempotency-Key" and first.json()["id"] in error["message"]
    assert Batch.objects.count() == 1 and BatchItem.objects.count() == 2
    # JSONL options are part of the request: same lines, other priority → another request
    lines = "\n".join(json.dumps({"custom_id": "x", "route": "intent", "query": "q"}) for _ in range(1))
    assert post(client, lines, key="k2", content_type="application/jsonl").status_code == 201
    other = post(client, lines, key="k2", content_type="application/jsonl", url=URL + "?priority=high")
    assert other.status_code == 409


def test_keys_are_per_team_and_requests_without_a_key_are_not_deduplicated(client, route, other_team):
    from teams.services import create_api_key

    assert post(client, body(), key="shared").status_code == 201
    other = APIClient()
    other.credentials(HTTP_AUTHORIZATION=f"Bearer {create_api_key(other_team, 't')[1]}")
    assert post(other, body(), key="shared").status_code == 201
    assert post(client, body()).status_code == 201
    assert post(client, body()).status_code == 201
    assert Batch.objects.count() == 4


@pytest.mark.parametrize("key", ["", " ", "a b", "x" * 256, "é"])
def test_bad_keys_are_400_naming_the_header(client, route, key):
    response = post(client, body(), key=key)
    if key == "":  # an empty header is no key
        assert response.status_code == 201
        return
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == "Idempotency-Key"
    assert Batch.objects.count() == 0


def test_invalid_body_with_a_key_stores_nothing_and_the_key_stays_free(client, route):
    bad = post(client, '{"items": [{"custom_id": "a"}]}', key="k")
    assert bad.status_code == 400
    assert post(client, body(), key="k").status_code == 201


@pytest.mark.django_db(transaction=True)
def test_racing_twins_make_one_batch(team, route, monkeypatch):
    """Two threads submit the same key at once: the unique constraint lets one insert."""
    from batches.submission import IdempotencyConflict, request_hash, submit_body, submit_idempotent

    started = []
    monkeypatch.setattr("batches.submission.enqueue.enqueue_start", started.append)  # no engine run here

    data = body().encode()
    digest = request_hash(data, "application/json")
    results, errors = [], []
    gate = threading.Barrier(2)

    def go():
        try:
            gate.wait()
            results.append(
                submit_idempotent(
                    team=team,
                    key="race",
                    request_hash=digest,
                    submit=lambda idem: submit_body(
                        team=team, body=data, content_type="application/json", idempotency=idem
                    ),
                )
            )
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=go) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors, errors
    assert len({batch.id for batch, _ in results}) == 1
    assert sorted(created for _, created in results) == [False, True]
    assert Batch.objects.filter(idempotency_key="race").count() == 1
    assert started == [str(results[0][0].id)]  # started once
    with pytest.raises(IdempotencyConflict):
        submit_idempotent(team=team, key="race", request_hash="0" * 64, submit=lambda idem: None)
