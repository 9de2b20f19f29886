"""Input polish on both surfaces: a UTF-8 BOM is accepted (REST JSON, REST JSONL, /v1/files), JSONL errors
name the body's line number next to the item index, and route/provider errors say what was probably meant."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from batches.models import Batch, BatchItem
from batches.submission import SubmissionError, parse_jsonl

from .helpers import DROP, URL, item, post_json

pytestmark = pytest.mark.django_db

BOM = b"\xef\xbb\xbf"


def jsonl_bytes(lines) -> bytes:
    return b"".join((x if isinstance(x, bytes) else json.dumps(x).encode()) + b"\n" for x in lines)


def post_raw(client, data: bytes, content_type: str):
    return client.generic("POST", URL, data, content_type=content_type)


# --- BOM ----------------------------------------------------------------------------------------------


def test_rest_json_body_with_a_bom_is_accepted(client, routes):
    body = BOM + json.dumps({"items": [item(0), item(1)], "metadata": {"src": "excel"}}).encode()
    response = post_raw(client, body, "application/json")
    assert response.status_code == 201, response.content
    assert response.json()["request_counts"]["total"] == 2 and response.json()["metadata"] == {"src": "excel"}


@pytest.mark.parametrize("first", [[], [b""], [b"   "]], ids=["bom+item", "bom+blank", "bom+spaces"])
def test_rest_jsonl_body_with_a_bom_is_accepted(client, routes, first):
    lines = [*first, item(0), item(1)]
    body = BOM + jsonl_bytes(lines)
    response = post_raw(client, body, "application/jsonl")
    assert response.status_code == 201, response.content
    assert BatchItem.objects.filter(custom_id="c0").exists()
    # the BOM is not part of the first item's stored size or content
    assert parse_jsonl(BOM + jsonl_bytes([item(0)])).item_sizes == [len(json.dumps(item(0)))]


def test_a_bom_starting_a_later_line_is_accepted_on_both_surfaces_too(client, routes, held):
    """`cat a.jsonl b.jsonl` where b.jsonl starts with a BOM."""
    body = jsonl_bytes([item(0)]) + BOM + jsonl_bytes([item(1)])
    assert post_raw(client, body, "application/jsonl").status_code == 201
    data = jsonl_bytes([_line("a", "intent")]) + BOM + jsonl_bytes([_line("b", "intent")])
    assert _v1_batch(client, data)["status"] == "in_progress"


# --- JSONL line numbers -------------------------------------------------------------------------------


def test_jsonl_validation_errors_give_the_line_number_and_the_index(client, routes, row_counts):
    lines = [item(0), b"", b"", item(1, route="nope"), b"   ", item(2, custom_id=DROP)]
    response = post_raw(client, jsonl_bytes(lines), "application/jsonl")
    assert response.status_code == 400
    errors = response.json()["errors"]
    assert [(e["index"], e["line"], e["field"]) for e in errors] == [(1, 4, "route"), (2, 6, "custom_id")]
    assert errors[0]["message"].startswith("line 4: ") and errors[1]["message"].startswith("line 6: ")
    assert row_counts() == (0, 0)


def test_jsonl_parse_errors_give_the_line_number_and_the_index(client, routes):
    body = jsonl_bytes([item(0), b"", b"{oops"])
    response = post_raw(client, body, "application/jsonl")
    assert response.status_code == 400
    [error] = response.json()["errors"]
    assert (error["index"], error["line"], error["field"]) == (1, 3, "item")
    assert error["message"].startswith("line 3: not valid JSON")


def test_json_body_errors_have_no_line(client, routes):
    response = post_json(client, {"items": [item(0, route="nope")]})
    assert response.status_code == 400
    assert response.json()["errors"] == [
        {"index": 0, "field": "route", "message": response.json()["errors"][0]["message"]}
    ]


def test_line_numbers_reach_python_callers_of_the_jsonl_parser(routes, team):
    from batches.submission import submit_batch

    parsed = parse_jsonl(jsonl_bytes([b"", item(0, provider="nobody", route=DROP)]))
    assert parsed.item_lines == [2]
    with pytest.raises(SubmissionError) as caught:
        submit_batch(
            team=team, items=parsed.items, item_sizes=parsed.item_sizes, item_lines=parsed.item_lines
        )
    [error] = caught.value.errors
    assert (error.index, error.line, error.field) == (0, 2, "provider")


# --- did you mean -------------------------------------------------------------------------------------


def _error(client, **overrides):
    response = post_json(client, {"items": [item(0, **overrides)]})
    assert response.status_code == 400, response.content
    [error] = response.json()["errors"]
    return error


def test_a_route_that_names_a_provider_says_so(client, routes):
    error = _error(client, route="alpha")
    assert error["field"] == "route"
    assert error["message"] == "unknown route 'alpha' — 'alpha' is a provider: use \"provider\": \"alpha\""


def test_a_misspelt_route_gets_a_did_you_mean(client, routes):
    error = _error(client, route="intnet")
    assert error["field"] == "route"
    assert (
        error["message"].startswith("unknown route 'intnet'") and "did you mean 'intent'?" in error["message"]
    )


def test_a_route_close_to_a_provider_name_suggests_the_provider_field(client, routes):
    error = _error(client, route="alpah")
    assert 'did you mean "provider": "alpha"?' in error["message"], error


def test_a_route_with_nothing_close_gets_no_guess(client, routes):
    error = _error(client, route="zzzzzz")
    assert "did you mean" not in error["message"] and "is a provider" not in error["message"]


def test_a_misspelt_provider_gets_a_did_you_mean(client, routes):
    error = _error(client, route=DROP, provider="bet")
    assert error["field"] == "provider"
    assert (
        error["message"].startswith("unknown provider 'bet'") and "did you mean 'beta'?" in error["message"]
    )


def test_a_provider_that_names_a_route_says_so(client, routes):
    error = _error(client, route=DROP, provider="intent")
    assert error["message"] == "unknown provider 'intent' — 'intent' is a route: use \"route\": \"intent\""


def test_many_bad_names_in_one_batch_stay_fast(client, routes, django_assert_max_num_queries):
    items = [item(i, route=f"intnet{i % 7}") for i in range(2000)]
    with django_assert_max_num_queries(12):
        response = post_json(client, {"items": items})
    assert response.status_code == 400 and response.json()["error_count"] == 2000


# --- /v1 -----------------------------------------------------------------------------------------------


def _line(custom_id, model, **body):
    return {
        "custom_id": custom_id,
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"model": model, "messages": [{"role": "user", "content": "hi"}], **body},
    }


def _v1_batch(client, data: bytes):
    upload = client.post(
        "/v1/files", {"file": SimpleUploadedFile("in.jsonl", data), "purpose": "batch"}, format="multipart"
    )
    assert upload.status_code == 200, upload.content
    body = {
        "input_file_id": upload.json()["id"],
        "endpoint": "/v1/chat/completions",
        "completion_window": "24h",
    }
    response = client.post("/v1/batches", body, format="json")
    assert response.status_code == 200, response.content
    return response.json()


@pytest.fixture
def held(monkeypatch, files_root):
    from batches import submission

    monkeypatch.setattr(submission.enqueue, "enqueue_start", lambda batch_id: None)


@pytest.fixture
def files_root(tmp_path, settings):
    settings.STORAGES = {
        **settings.STORAGES,
        "openai_files": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(tmp_path / "files")},
        },
    }
    return tmp_path / "files"


@pytest.mark.parametrize("first", [[], [b""]], ids=["bom+line", "bom+blank"])
def test_v1_input_file_with_a_bom_is_accepted(client, routes, held, first):
    data = BOM + jsonl_bytes([*first, _line("a", "intent"), _line("b", "alpha")])
    batch = _v1_batch(client, data)
    assert batch["status"] == "in_progress", batch.get("errors")
    assert batch["request_counts"]["total"] == 2
    assert set(BatchItem.objects.values_list("custom_id", flat=True)) == {"a", "b"}


def test_v1_errors_give_the_file_line_after_blank_lines(client, routes, held):
    data = jsonl_bytes([_line("a", "intent"), b"", _line("b", "intnet"), b"", b"", _line("b", "intent")])
    batch = _v1_batch(client, data)
    assert batch["status"] == "failed"
    errors = batch["errors"]["data"]
    assert [(e["line"], e["code"]) for e in errors] == [(3, "model_not_found"), (6, "duplicate_custom_id")]
    assert not Batch.objects.exists()


def test_v1_unknown_model_gets_a_did_you_mean_over_routes_and_providers(client, routes, held):
    data = jsonl_bytes([_line("a", "intnet"), _line("b", "alpah"), _line("c", "zzzzzz")])
    errors = _v1_batch(client, data)["errors"]["data"]
    messages = {e["line"]: e["message"] for e in errors}
    assert all(e["param"] == "body.model" and e["code"] == "model_not_found" for e in errors)
    assert messages[1].startswith("unknown model 'intnet'") and "did you mean 'intent'?" in messages[1]
    assert "did you mean 'alpha'?" in messages[2] and '"provider"' not in messages[2]
    assert "did you mean" not in messages[3]
    assert all("body.model names a route or a provider" in m for m in messages.values())
