"""Metadata keys the gateway writes itself (``retry_of``, ``gateway_…``) cannot come from a client: both
surfaces answer 400 naming the key and store nothing; the gateway's own retry still writes ``retry_of``."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from batches.models import Batch, BatchItem
from openai_api.models import OpenAIBatch

from .helpers import item, post_json

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "key", ["retry_of", "Retry_Of", "gateway_retry_of", "gateway_", "GATEWAY_source"], ids=str
)
def test_rest_refuses_a_reserved_metadata_key_naming_it(client, routes, row_counts, key):
    response = post_json(client, {"items": [item(0)], "metadata": {"job": "x", key: "not-a-uuid"}})
    assert response.status_code == 400, response.content
    [error] = response.json()["errors"]
    assert error["index"] is None and error["field"] == f"metadata.{key}"
    assert "reserved" in error["message"] and key in error["message"]
    assert row_counts() == (0, 0)


def test_rest_allows_keys_that_merely_look_alike(client, routes):
    metadata = {"retry": "1", "of": "2", "my_gateway_id": "3", "retry_of_job": "4"}
    response = post_json(client, {"items": [item(0)], "metadata": metadata})
    assert response.status_code == 201 and response.json()["metadata"] == metadata


def test_rest_names_every_reserved_key_at_once(client, routes):
    response = post_json(client, {"items": [item(0)], "metadata": {"retry_of": 1, "gateway_x": 2}})
    assert sorted(e["field"] for e in response.json()["errors"]) == [
        "metadata.gateway_x",
        "metadata.retry_of",
    ]


@pytest.fixture
def files_root(tmp_path, settings):
    settings.STORAGES = {
        **settings.STORAGES,
        "openai_files": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(tmp_path / "files")},
        },
    }


@pytest.mark.parametrize("key", ["retry_of", "gateway_origin"])
def test_v1_refuses_a_reserved_metadata_key_naming_it(client, routes, files_root, key):
    line = {
        "custom_id": "a",
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"model": "intent", "messages": [{"role": "user", "content": "hi"}]},
    }
    data = (json.dumps(line) + "\n").encode()
    upload = client.post(
        "/v1/files", {"file": SimpleUploadedFile("in.jsonl", data), "purpose": "batch"}, format="multipart"
    )
    body = {
        "input_file_id": upload.json()["id"],
        "endpoint": "/v1/chat/completions",
        "completion_window": "24h",
        "metadata": {key: "not-a-uuid"},
    }
    response = client.post("/v1/batches", body, format="json")
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["param"] == f"metadata.{key}" and "reserved" in error["message"]
    assert error["type"] == "invalid_request_error"
    assert not Batch.objects.exists() and not BatchItem.objects.exists() and not OpenAIBatch.objects.exists()


def test_the_gateways_own_retry_still_writes_retry_of(client, routes, team):
    from django.utils import timezone

    from batches.models import BatchStatus, ItemStatus
    from batches.retry import retry_failed

    created = post_json(client, {"items": [item(0), item(1)], "metadata": {"job": "nightly"}}).json()
    batch = Batch.objects.get(pk=created["id"])
    BatchItem.objects.filter(batch=batch, custom_id="c1").update(status=ItemStatus.FAILED)
    Batch.objects.filter(pk=batch.pk).update(status=BatchStatus.COMPLETED, completed_at=timezone.now())
    new = retry_failed(Batch.objects.get(pk=batch.pk))
    assert new.metadata == {"job": "nightly", "retry_of": str(batch.pk)}
