"""Retention of /v1 files (#29): purge_old_data deletes files past their expires_at and the input, output
and error files of batches past retention, rows and blobs in the storage (before: only the items purger
was registered, and after backdating a batch 30 days and `purge_old_data --days 7` its input and output
files still downloaded whole). Its --help says only what it does."""

from __future__ import annotations

import datetime as dt
import json
from io import StringIO

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.utils import timezone
from rest_framework.test import APIClient

from batches import submission
from batches.models import Batch, BatchItem, BatchStatus, ItemStatus
from openai_api.models import File, OpenAIBatch
from teams.services import create_api_key

pytestmark = pytest.mark.django_db

BODY = {"endpoint": "/v1/chat/completions", "completion_window": "24h"}


@pytest.fixture(autouse=True)
def files_root(tmp_path, settings, monkeypatch):
    """Files in a temp dir; batches stored, not started (the test plays the engine)."""
    settings.STORAGES = {
        **settings.STORAGES,
        "openai_files": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(tmp_path / "files")},
        },
    }
    monkeypatch.setattr(submission.enqueue, "enqueue_start", lambda batch_id: None)
    return tmp_path / "files"


@pytest.fixture
def client(team, make_provider, make_route):
    make_route("chat", make_provider("alpha"))
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Bearer {create_api_key(team, 'purge')[1]}")
    return c


def line(custom_id: str, model: str = "chat") -> dict:
    return {"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions",
            "body": {"model": model, "messages": [{"role": "user", "content": "secret prompt"}]}}  # fmt: skip


def upload(client, *custom_ids: str, model: str = "chat") -> str:
    data = "".join(json.dumps(line(c, model)) + "\n" for c in custom_ids).encode()
    response = client.post(
        "/v1/files", {"file": SimpleUploadedFile("in.jsonl", data), "purpose": "batch"}, format="multipart"
    )
    assert response.status_code == 200, response.content
    return response.json()["id"]


def start(client, file_id: str) -> dict:
    response = client.post("/v1/batches", {**BODY, "input_file_id": file_id}, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def finish(client, batch: dict, *, days_ago: float = 0) -> dict:
    """Play the engine: the first item succeeds, the others fail; the batch ends `days_ago`; the next read
    writes its output and error files."""
    native = Batch.objects.get(openai_batch__id=batch["id"])
    items = list(BatchItem.objects.filter(batch=native).order_by("seq"))
    ended = timezone.now() - dt.timedelta(days=days_ago)
    BatchItem.objects.filter(pk=items[0].pk).update(
        status=ItemStatus.SUCCEEDED, response={"choices": [{"message": {"content": "secret answer"}}]},
        finished_at=ended,
    )  # fmt: skip
    BatchItem.objects.filter(pk__in=[i.pk for i in items[1:]]).update(
        status=ItemStatus.FAILED, error_type="client_error", error_message="no", finished_at=ended
    )
    Batch.objects.filter(pk=native.pk).update(
        status=BatchStatus.COMPLETED, completed_count=1, failed_count=len(items) - 1, completed_at=ended
    )
    done = client.get(f"/v1/batches/{batch['id']}").json()
    assert done["status"] == "completed" and done["output_file_id"] and done["error_file_id"]
    return done


def downloads(client, file_id: str) -> bool:
    response = client.get(f"/v1/files/{file_id}/content")
    assert response.status_code in (200, 404), response.content
    return response.status_code == 200


def blob_of(files_root, file_id: str):
    return files_root / File.objects.get(pk=file_id).storage_name


def purge(*args: str) -> str:
    out = StringIO()
    call_command("purge_old_data", *args, stdout=out)
    return out.getvalue()


def test_purge_deletes_the_files_and_blobs_of_batches_past_retention(client, files_root, settings):
    settings.GATEWAY_RETENTION_DAYS = 0  # --days below
    old = finish(client, start(client, upload(client, "o1", "o2")), days_ago=30)
    recent = finish(client, start(client, upload(client, "n1", "n2")), days_ago=1)
    shared = upload(client, "s1", "s2")  # used by an old batch and by one still running
    old_shared = finish(client, start(client, shared), days_ago=30)
    running = start(client, shared)
    invalid = upload(client, "x1", model="no-such-model")  # a `failed` batch, 30 days ago
    failed = start(client, invalid)
    assert failed["status"] == "failed"
    OpenAIBatch.objects.filter(pk=failed["id"]).update(failed_at=timezone.now() - dt.timedelta(days=30))

    gone_ids = [old["input_file_id"], old["output_file_id"], old["error_file_id"],
                old_shared["output_file_id"], old_shared["error_file_id"], invalid]  # fmt: skip
    kept_ids = [recent["input_file_id"], recent["output_file_id"], recent["error_file_id"], shared]
    blobs = {fid: blob_of(files_root, fid) for fid in gone_ids + kept_ids}
    assert all(downloads(client, fid) for fid in gone_ids + kept_ids)

    assert "would purge 4 items, 6 files" in purge("--days", "7", "--dry-run")
    assert File.objects.count() == 10 and all(p.exists() for p in blobs.values())

    out = purge("--days", "7")
    assert "purged 4 items, 6 files" in out, out
    for fid in gone_ids:
        assert not downloads(client, fid), fid
        assert client.get(f"/v1/files/{fid}").status_code == 404
        assert not blobs[fid].exists(), fid  # the blob is gone from the storage, not only the row
    assert not File.objects.filter(pk__in=gone_ids).exists()
    for fid in kept_ids:
        assert downloads(client, fid) and blobs[fid].exists(), fid
    # the batch objects still name their files (as OpenAI shows an expired file's id); items purged
    again = client.get(f"/v1/batches/{old['id']}").json()
    assert (again["input_file_id"], again["output_file_id"], again["error_file_id"]) == (
        old["input_file_id"], old["output_file_id"], old["error_file_id"],
    )  # fmt: skip
    assert client.get(f"/v1/batches/{running['id']}").json()["status"] == "in_progress"
    assert not BatchItem.objects.filter(batch__openai_batch__id=old["id"], response__isnull=False).exists()

    assert "purged 0 items, 0 files" in purge("--days", "7")  # again: nothing left to do


def test_an_expired_file_is_gone_from_storage_and_its_id_answers_404(client, files_root, settings):
    settings.GATEWAY_RETENTION_DAYS = 0  # expiry does not need retention
    expired, live = upload(client, "e1"), upload(client, "l1")
    expired_blob, live_blob = blob_of(files_root, expired), blob_of(files_root, live)
    File.objects.filter(pk=expired).update(expires_at=timezone.now() - dt.timedelta(minutes=1))
    assert client.get(f"/v1/files/{expired}").status_code == 404
    assert client.get(f"/v1/files/{expired}/content").status_code == 404
    assert expired_blob.exists()  # until the purge runs

    assert "would purge 1 files" in purge("--dry-run") and expired_blob.exists()
    out = purge()
    assert "retention is off" in out and "purged 1 files past their expires_at" in out, out
    assert not expired_blob.exists() and not File.objects.filter(pk=expired).exists()
    assert client.get(f"/v1/files/{expired}").status_code == 404
    assert live_blob.exists() and downloads(client, live)


def test_the_beat_task_deletes_expired_files_with_retention_off(client, files_root, settings):
    from observability.tasks import purge_old_data_task

    settings.GATEWAY_RETENTION_DAYS = 0
    expired = upload(client, "e1")
    blob = blob_of(files_root, expired)
    File.objects.filter(pk=expired).update(expires_at=timezone.now() - dt.timedelta(minutes=1))
    assert purge_old_data_task() == {"files": 1}
    assert not blob.exists() and not File.objects.exists()


def test_a_blob_the_storage_fails_to_delete_keeps_its_row_for_the_next_run(client, files_root, settings,
                                                                           monkeypatch):  # fmt: skip
    from django.core.files.storage import FileSystemStorage

    settings.GATEWAY_RETENTION_DAYS = 0
    stuck, other = upload(client, "a"), upload(client, "b")
    File.objects.update(expires_at=timezone.now() - dt.timedelta(minutes=1))
    real_delete = FileSystemStorage.delete

    def delete(self, name):
        if name.endswith(stuck):
            raise OSError("storage unavailable")
        return real_delete(self, name)

    monkeypatch.setattr(FileSystemStorage, "delete", delete)
    assert "purged 1 files" in purge()
    assert list(File.objects.values_list("pk", flat=True)) == [stuck]  # still expired: a 404, not listed
    assert client.get(f"/v1/files/{stuck}").status_code == 404
    monkeypatch.setattr(FileSystemStorage, "delete", real_delete)
    assert "purged 1 files" in purge()
    assert not File.objects.exists() and other


def test_help_says_what_the_command_does():
    from observability.management.commands.purge_old_data import Command

    text = " ".join(Command.help.split())
    assert "past their expires_at" in text and "blobs" in text
    assert "input, output and error files" in text
    assert "uploaded files of batches finished" not in text  # the old claim, untrue before
