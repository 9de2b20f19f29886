"""/v1/files abuse limits (#29): per-team quotas on the files a team holds (429 naming the limit, nothing
stored, other teams unaffected), a default expiry shown as `expires_at` (an expired file is a 404
everywhere and cannot start a batch), and a purpose=batch upload that is not JSONL refused at upload."""

from __future__ import annotations

import datetime as dt
import json
import os

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone
from rest_framework.test import APIClient

from batches import submission
from openai_api.models import File, OpenAIBatch
from teams.services import create_api_key

from .conftest import request_line

pytestmark = pytest.mark.django_db

BOM = b"\xef\xbb\xbf"


def client_of(team) -> APIClient:
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Bearer {create_api_key(team, 'files')[1]}")
    return c


def jsonl_bytes(lines) -> bytes:
    return b"".join((x if isinstance(x, bytes) else json.dumps(x).encode()) + b"\n" for x in lines)


def upload(client, data: bytes, name="in.jsonl"):
    return client.post(
        "/v1/files", {"file": SimpleUploadedFile(name, data), "purpose": "batch"}, format="multipart"
    )


def blobs(storage) -> list[str]:
    """The names of the blobs in the files storage (the default: the database)."""
    dirs, _ = storage.listdir("")
    return [f"{d}/{name}" for d in dirs for name in storage.listdir(d)[1]]


VALID = jsonl_bytes([request_line("a", "chat")])


# --- quotas ---------------------------------------------------------------------------------------------


def test_file_count_quota_refuses_the_upload_over_it_and_another_team_still_uploads(
    team, other_team, files_root, settings
):
    settings.GATEWAY_FILES_MAX_PER_TEAM = 2
    mine, theirs = client_of(team), client_of(other_team)
    assert upload(mine, VALID).status_code == 200
    assert upload(mine, VALID).status_code == 200
    refused = upload(mine, VALID)
    assert refused.status_code == 429, refused.content
    error = refused.json()["error"]
    assert (error["code"], error["param"], error["type"]) == (
        "file_quota_exceeded", "limits.stored_files", "insufficient_quota",
    )  # fmt: skip
    assert "holds 2 files; its limit is 2 files" in error["message"]
    assert refused["x-should-retry"] == "false"  # the openai SDK does not re-send the upload
    assert "Retry-After" not in refused
    # nothing stored: neither a row nor a blob
    assert File.objects.filter(team=team).count() == 2 and len(blobs(files_root)) == 2
    # the other team is not affected
    assert upload(theirs, VALID).status_code == 200
    # the team's own value overrides the default; a deleted file frees its place
    team.max_stored_files = 3
    team.save()
    assert upload(mine, VALID).status_code == 200
    assert upload(mine, VALID).status_code == 429
    first = File.objects.filter(team=team).order_by("created_at").first()
    assert mine.delete(f"/v1/files/{first.id}").status_code == 200
    assert upload(mine, VALID).status_code == 200


def test_byte_quota_refuses_the_upload_over_it_and_another_team_still_uploads(
    team, other_team, files_root, settings
):
    data = jsonl_bytes([request_line(f"r{i}", "chat", content="x" * 400) for i in range(10)])  # ~5 KB
    settings.GATEWAY_FILES_MAX_BYTES_PER_TEAM = 2 * len(data) + 1000
    mine, theirs = client_of(team), client_of(other_team)
    assert upload(mine, data).status_code == 200
    assert upload(mine, data).status_code == 200
    refused = upload(mine, data)
    assert refused.status_code == 429, refused.content
    error = refused.json()["error"]
    assert (error["code"], error["param"]) == ("file_quota_exceeded", "limits.stored_file_bytes")
    assert f"holds {2 * len(data)} bytes of files and this file adds {len(data)}" in error["message"]
    assert File.objects.filter(team=team).count() == 2 and len(blobs(files_root)) == 2
    assert upload(mine, VALID).status_code == 200  # a smaller file still fits
    assert upload(theirs, data).status_code == 200
    # expired files no longer count (they are gone for the team)
    File.objects.filter(team=team).update(expires_at=timezone.now() - dt.timedelta(seconds=1))
    assert upload(mine, data).status_code == 200


def test_batch_output_files_are_written_even_over_the_quota(team, files_root, settings, make_provider,
                                                             make_route, monkeypatch):  # fmt: skip
    from batches.models import Batch, BatchItem, BatchStatus, ItemStatus

    monkeypatch.setattr(submission.enqueue, "enqueue_start", lambda batch_id: None)
    make_route("chat", make_provider("alpha"))
    client = client_of(team)
    file = upload(client, VALID).json()
    created = client.post(
        "/v1/batches",
        {"input_file_id": file["id"], "endpoint": "/v1/chat/completions", "completion_window": "24h"},
        format="json",
    ).json()
    settings.GATEWAY_FILES_MAX_PER_TEAM = 1  # the team is at its limit now
    native = Batch.objects.get(openai_batch__id=created["id"])
    BatchItem.objects.filter(batch=native).update(status=ItemStatus.SUCCEEDED, response={"choices": []},
                                                  finished_at=timezone.now())  # fmt: skip
    Batch.objects.filter(pk=native.pk).update(status=BatchStatus.COMPLETED, completed_count=1,
                                              completed_at=timezone.now())  # fmt: skip
    batch = client.get(f"/v1/batches/{created['id']}").json()
    assert batch["status"] == "completed" and batch["output_file_id"]
    assert upload(client, VALID).status_code == 429  # the output file counts against the quota


# --- expiry ---------------------------------------------------------------------------------------------


def test_expires_at_is_the_default_expiry_after_created_at(team, files_root, settings):
    client = client_of(team)
    body = upload(client, VALID).json()
    assert body["expires_at"] - body["created_at"] == 30 * 86400  # GATEWAY_FILES_EXPIRE_DAYS default
    assert client.get(f"/v1/files/{body['id']}").json()["expires_at"] == body["expires_at"]
    assert client.get("/v1/files").json()["data"][0]["expires_at"] == body["expires_at"]
    settings.GATEWAY_FILES_EXPIRE_DAYS = 2
    body = upload(client, VALID).json()
    assert body["expires_at"] - body["created_at"] == 2 * 86400
    settings.GATEWAY_FILES_EXPIRE_DAYS = 0  # never
    assert upload(client, VALID).json()["expires_at"] is None


def test_an_expired_file_is_a_404_and_cannot_start_a_batch(team, files_root, make_provider, make_route,
                                                            monkeypatch):  # fmt: skip
    monkeypatch.setattr(submission.enqueue, "enqueue_start", lambda batch_id: None)
    make_route("chat", make_provider("alpha"))
    client = client_of(team)
    expired, live = upload(client, VALID).json(), upload(client, VALID).json()
    File.objects.filter(pk=expired["id"]).update(expires_at=timezone.now() - dt.timedelta(seconds=1))
    for response in (
        client.get(f"/v1/files/{expired['id']}"),
        client.get(f"/v1/files/{expired['id']}/content"),
        client.delete(f"/v1/files/{expired['id']}"),
    ):
        assert response.status_code == 404, response.content
        assert response.json()["error"]["code"] == "not_found"
    assert [f["id"] for f in client.get("/v1/files").json()["data"]] == [live["id"]]
    body = {"endpoint": "/v1/chat/completions", "completion_window": "24h"}
    refused = client.post("/v1/batches", {**body, "input_file_id": expired["id"]}, format="json")
    assert refused.status_code == 404 and refused.json()["error"]["param"] == "input_file_id"
    assert not OpenAIBatch.objects.exists()
    started = client.post("/v1/batches", {**body, "input_file_id": live["id"]}, format="json")
    assert started.status_code == 200 and started.json()["status"] == "in_progress"


# --- not JSONL ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data, says",
    [
        (os.urandom(2 * 1024 * 1024), "is not UTF-8 text"),
        (
            b"custom_id,prompt\nr1,hello\n",
            "line 1 does not start a JSON object (it starts with 'custom_id,prompt')",
        ),
        (jsonl_bytes([request_line("a", "chat"), b"plain text here"]), "line 2 does not start a JSON object"),
        (json.dumps(request_line("a", "chat"), indent=2).encode(), "line 2 does not start a JSON object"),
        (json.dumps([request_line("a", "chat")]).encode(), "line 1 does not start a JSON object"),
        (VALID + '{"custom_id": "é"}\n'.encode("latin-1"), "line 2 is not UTF-8 text (byte 0xe9)"),
        (VALID.decode().encode("utf-16"), "line 1 is not UTF-8 text"),
        (b"\n  \r\n\t\n", "the file holds only blank lines"),
    ],
    ids=["random", "csv", "text-line", "pretty-json", "json-array", "latin-1", "utf-16", "blank"],
)
def test_an_upload_that_is_not_jsonl_is_refused_and_nothing_is_stored(team, files_root, data, says):
    response = upload(client_of(team), data)
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert (error["param"], error["code"], error["type"]) == (
        "file",
        "invalid_file_format",
        "invalid_request_error",
    )
    assert error["message"].startswith("file is not JSONL: ") and says in error["message"]
    assert "one JSON object (one request) per line" in error["message"]
    assert not File.objects.exists() and blobs(files_root) == []


@pytest.mark.parametrize(
    "data",
    [
        BOM + VALID,
        b"\n\r\n" + BOM + VALID + b"\n\n",
        VALID + BOM + VALID,  # a concatenated file's BOM
        VALID.replace(b"\n", b"\r\n"),
        VALID + b"{not json\n",  # starts an object: reported by line when a batch is created
    ],
    ids=["bom", "blank-lines-then-bom", "second-bom", "crlf", "object-with-a-typo"],
)
def test_jsonl_uploads_are_accepted(team, files_root, data):
    response = upload(client_of(team), data)
    assert response.status_code == 200, response.content
    assert files_root.open(File.objects.get().storage_name).read() == data


def test_the_format_check_gives_one_answer_whatever_the_chunk_size():
    """The check reads in chunks: a BOM, a character or a line start split by a chunk's end changes
    nothing (the line numbers are the same as read_input's)."""
    from io import BytesIO

    from openai_api.conversion import jsonl_format_problem

    good = jsonl_bytes([json.dumps(request_line("a", "chat", content="é€😀"), ensure_ascii=False).encode(), b"",
                        request_line("b", "chat")])  # fmt: skip
    cases = {
        BOM + good: None,
        b"\r\n \n" + BOM + b"  " + good: None,
        good + BOM + good + b"\n\n": None,
        good * 3 + b"  x\n" + good: "line 10 does not start a JSON object (it starts with 'x')",
        good + "é".encode()[:1] + b"\n": "line 4 is not UTF-8 text (byte 0xc3)",
        good + "€".encode()[:2]: "line 4 is not UTF-8 text (byte 0xe2)",  # the file ends inside it
        good + BOM + BOM + b"{}\n": "line 4 does not start a JSON object (it starts with '\\ufeff",
        b" \n\t\n" + BOM: "the file holds only blank lines",
    }
    for data, expected in cases.items():
        for size in (1, 2, 3, 5, 8, 64, 1024 * 1024):
            found = jsonl_format_problem(BytesIO(data), size)
            if expected is None:
                assert found is None, (data, size, found)
            else:
                assert found is not None and found.startswith(expected), (data, size, found)
