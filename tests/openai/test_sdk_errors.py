"""Error paths of /v1 through the real openai SDK against Django's live server: the SDK raises its usual
exception classes from OpenAI-shaped error bodies; an invalid input file gives a `failed` batch whose
`errors` name the line; other teams' objects are 404; files list/filter/delete."""

from __future__ import annotations

import openai
import pytest

from batches.models import Batch
from openai_api.models import File, OpenAIBatch
from sim.testing import run_simulator_in_thread

from .conftest import jsonl, read_jsonl, request_line

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]

SIM = {
    "time_scale": 1,
    "seed": 11,
    "providers": {"fast": {"rpm": 100000, "tpm": 100000000, "median_ms": 2, "sigma": 0.1}},
}


@pytest.fixture
def sim():
    with run_simulator_in_thread(SIM) as handle:
        yield handle


@pytest.fixture
def fast(sim, make_provider, make_route):
    provider = make_provider(
        "fast", base_url=sim.provider_url("fast"), rpm=60000, tpm=10**8, max_concurrency=8
    )
    make_route("chat", provider)
    return provider


def test_bad_or_missing_key_is_authentication_error(sdk, team, api_key):
    with pytest.raises(openai.AuthenticationError) as caught:
        sdk("bgw_not-a-real-key").files.list()
    assert caught.value.status_code == 401
    assert caught.value.body["message"] == "invalid API key"
    assert caught.value.body["code"] == "invalid_api_key"


def test_unknown_file_id_is_not_found(client_for, team):
    client = client_for(team)
    for call in (
        lambda: client.files.retrieve("file-nope"),
        lambda: client.files.content("file-nope"),
        lambda: client.files.delete("file-nope"),
        lambda: client.batches.create(
            input_file_id="file-nope", endpoint="/v1/chat/completions", completion_window="24h"
        ),
        lambda: client.batches.retrieve("batch_nope"),
        lambda: client.batches.cancel("batch_nope"),
    ):
        with pytest.raises(openai.NotFoundError) as caught:
            call()
        assert caught.value.status_code == 404
        assert caught.value.body["type"] == "invalid_request_error"
    assert Batch.objects.count() == 0 and OpenAIBatch.objects.count() == 0


def test_upload_list_filter_retrieve_content_delete(client_for, team, files_root):
    client = client_for(team)
    lines = [request_line(f"r{i}", "chat") for i in range(3)]
    uploaded = client.files.create(file=jsonl(lines), purpose="batch")
    assert uploaded.object == "file" and uploaded.purpose == "batch" and uploaded.filename == "input.jsonl"
    assert uploaded.id.startswith("file-")
    raw = jsonl(lines).getvalue()
    assert uploaded.bytes == len(raw)
    # the blob is in the storage, not the database
    row = File.objects.get(pk=uploaded.id)
    assert files_root.open(row.storage_name).read() == raw
    assert client.files.retrieve(uploaded.id).bytes == len(raw)
    assert client.files.content(uploaded.id).content == raw

    second = client.files.create(file=jsonl(lines[:1]), purpose="batch")
    listed = client.files.list()
    assert [f.id for f in listed.data] == [second.id, uploaded.id]  # newest first
    assert [f.id for f in client.files.list(order="asc").data] == [uploaded.id, second.id]
    assert client.files.list(purpose="batch_output").data == []
    page = client.files.list(limit=1)
    assert [f.id for f in page.data] == [second.id] and page.has_more
    assert [f.id for f in client.files.list(limit=1, after=second.id).data] == [uploaded.id]

    deleted = client.files.delete(uploaded.id)
    assert deleted.deleted is True and deleted.id == uploaded.id
    assert not files_root.exists(row.storage_name)
    with pytest.raises(openai.NotFoundError):
        client.files.retrieve(uploaded.id)


def test_upload_with_wrong_purpose_is_bad_request(client_for, team):
    with pytest.raises(openai.BadRequestError) as caught:
        client_for(team).files.create(file=jsonl([request_line("a", "chat")]), purpose="fine-tune")
    assert caught.value.body["param"] == "purpose"
    assert File.objects.count() == 0


def test_wrong_endpoint_is_bad_request_and_nothing_is_stored(client_for, team, fast):
    client = client_for(team)
    file = client.files.create(file=jsonl([request_line("a", "chat")]), purpose="batch")
    with pytest.raises(openai.BadRequestError) as caught:
        client.batches.create(input_file_id=file.id, endpoint="/v1/completions", completion_window="24h")
    assert caught.value.body["param"] == "endpoint"
    with pytest.raises(openai.BadRequestError) as caught:
        client.batches.create(
            input_file_id=file.id, endpoint="/v1/chat/completions", completion_window="3 days"
        )
    assert caught.value.body["param"] == "completion_window"
    with pytest.raises(openai.BadRequestError) as caught:
        client.batches.create(
            input_file_id=file.id,
            endpoint="/v1/chat/completions",
            completion_window="24h",
            extra_body={"priority": "urgent"},
        )
    assert caught.value.body["param"] == "priority"
    assert Batch.objects.count() == 0 and OpenAIBatch.objects.count() == 0


def test_provider_batch_always_that_no_provider_can_serve_is_a_400_naming_the_field_with_nothing_stored(
    client_for, team, fast, sim
):
    client = client_for(team)  # "fast" has no batch API
    file = client.files.create(file=jsonl([request_line("a", "chat")]), purpose="batch")
    with pytest.raises(openai.BadRequestError) as caught:
        client.batches.create(input_file_id=file.id, endpoint="/v1/chat/completions", completion_window="24h",
                              extra_body={"provider_batch": "always"})  # fmt: skip
    assert caught.value.body["param"] == "provider_batch" and "fast" in caught.value.body["message"]
    assert caught.value.body["code"] == "invalid_value"
    assert Batch.objects.count() == 0 and OpenAIBatch.objects.count() == 0
    assert client.batches.list().data == []
    assert sum(sim.request_counts().get("fast", {}).values()) == 0


def test_bad_lines_make_a_failed_batch_naming_each_line_and_nothing_runs(client_for, team, fast, sim):
    client = client_for(team)
    lines = [
        request_line("ok-1", "chat"),
        "{not json",
        request_line("ok-1", "chat"),  # duplicate custom_id
        request_line("nomodel", "no-such-model"),
        {**request_line("badurl", "chat"), "url": "/v1/embeddings"},
        request_line("stream", "chat", stream=True),
    ]
    file = client.files.create(file=jsonl(lines), purpose="batch")
    batch = client.batches.create(
        input_file_id=file.id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    assert batch.status == "failed"
    assert batch.failed_at is not None and batch.in_progress_at is None
    assert batch.output_file_id is None and batch.error_file_id is None
    # every problem in one answer, by line: the line checks and the native validator's findings
    found = [(e.line, e.param, e.code) for e in batch.errors.data]
    assert found == [
        (2, None, "invalid_json_line"),
        (3, "custom_id", "duplicate_custom_id"),
        (4, "body.model", "model_not_found"),
        (5, "url", "invalid_url"),
        (6, "body.stream", "invalid_request"),
    ]
    messages = {e.line: e.message for e in batch.errors.data}
    assert "no-such-model" in messages[4] and "ok-1" in messages[3]
    assert client.batches.retrieve(batch.id).status == "failed"
    assert Batch.objects.count() == 0  # nothing runs
    assert sim.counters()["totals"]["requests"] == 0


def test_other_teams_file_and_batch_are_not_found(client_for, team, other_team, fast):
    mine, theirs = client_for(team), client_for(other_team)
    file = mine.files.create(file=jsonl([request_line("a", "chat", max_tokens=4)]), purpose="batch")
    batch = mine.batches.create(
        input_file_id=file.id, endpoint="/v1/chat/completions", completion_window="1h"
    )
    for call in (
        lambda: theirs.files.retrieve(file.id),
        lambda: theirs.files.content(file.id),
        lambda: theirs.files.delete(file.id),
        lambda: theirs.batches.create(
            input_file_id=file.id, endpoint="/v1/chat/completions", completion_window="1h"
        ),
        lambda: theirs.batches.retrieve(batch.id),
        lambda: theirs.batches.cancel(batch.id),
    ):
        with pytest.raises(openai.NotFoundError):
            call()
    assert theirs.files.list().data == [] and theirs.batches.list().data == []
    assert mine.files.retrieve(file.id).id == file.id
    done = mine.batches.retrieve(batch.id)
    assert done.status == "completed"
    out = read_jsonl(mine.files.content(done.output_file_id).text)
    assert [line["custom_id"] for line in out] == ["a"]
    with pytest.raises(openai.NotFoundError):
        theirs.files.content(done.output_file_id)
    # cancelling a finished batch is a conflict, as on OpenAI
    with pytest.raises(openai.ConflictError):
        mine.batches.cancel(batch.id)


def test_idempotency_key_returns_the_first_batch_and_refuses_another_body(client_for, team, fast):
    client = client_for(team)
    file = client.files.create(file=jsonl([request_line("a", "chat")]), purpose="batch")
    headers = {"Idempotency-Key": "nightly-2026-11-30"}
    kwargs = dict(input_file_id=file.id, endpoint="/v1/chat/completions", completion_window="24h")
    first = client.batches.create(**kwargs, extra_headers=headers)
    again = client.batches.create(**kwargs, extra_headers=headers)
    assert again.id == first.id
    assert Batch.objects.count() == 1 and OpenAIBatch.objects.count() == 1
    with pytest.raises(openai.ConflictError) as caught:
        client.batches.create(**{**kwargs, "completion_window": "1h"}, extra_headers=headers)
    assert caught.value.body["code"] == "idempotency_conflict"
    with pytest.raises(openai.BadRequestError):
        client.batches.create(**kwargs, extra_headers={"Idempotency-Key": "has spaces"})
    # without a key every create is a new batch
    assert client.batches.create(**kwargs).id != first.id
    assert Batch.objects.count() == 2
