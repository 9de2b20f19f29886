"""POST /api/v1/batches: valid JSON/JSONL submissions and every kind of malformed payload."""

from __future__ import annotations

import asyncio
import json
import sys
import types
import uuid

import pytest
from django.test import override_settings

from batches.models import Batch, BatchItem
from gateway_engine.http import AiohttpProviderClient
from gateway_engine.routing import ProviderConfig
from gateway_engine.wire.openai import RESERVED_PARAMS
from tests.local_http import LocalHttp, reply

from .helpers import DROP, URL, item, post_json, post_jsonl

pytestmark = pytest.mark.django_db


def test_json_submission_stores_batch_and_normalized_items(client, routes, api_key, team):
    body = {
        "items": [
            item(0),
            item(
                1,
                route=DROP,
                provider="beta",
                query=DROP,
                messages=[{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}],
                params={"max_tokens": 16, "temperature": 0.2},
            ),
        ],
        "metadata": {"source": "test"},
    }
    response = post_json(client, body)
    assert response.status_code == 201, response.content
    data = response.json()
    assert set(data) == {
        "id",
        "status",
        "request_counts",
        "created_at",
        "started_at",
        "completed_at",
        "metadata",
        "stats",
        "priority",
        "completion_window",
        "expires_at",
        "webhook_url",  # issue #26 (docs/contract.md §4): null when none was given
        "cache",
        "steps",  # issue #40: [] for a batch without a pipeline
        "targets",  # issue #40: [] for a batch that is not an evaluation
    }
    assert data["priority"] == "normal" and data["completion_window"] is None and data["expires_at"] is None
    assert data["webhook_url"] is None
    assert data["cache"] is None  # not given: the route's cache setting decides (docs/cache.md)
    assert data["status"] == "queued"
    assert data["request_counts"] == {"total": 2, "completed": 0, "failed": 0, "cancelled": 0, "expired": 0}
    assert data["metadata"] == {"source": "test"}
    assert data["stats"]["batch_id"] == data["id"] and data["stats"]["task_total"] == 2
    assert data["stats"]["token_usage"] == {
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "retry_extra_tokens": 0,
        "cached_tokens": 0,
        "cache_write_tokens": 0,
    }

    batch = Batch.objects.get(pk=data["id"])
    assert batch.team == team and batch.api_key == api_key[0] and batch.total_count == 2
    first, second = BatchItem.objects.filter(batch=batch).order_by("seq")
    assert (first.seq, first.custom_id, first.route, first.requested_provider) == (0, "c0", "intent", "")
    assert first.payload == {"messages": [{"role": "user", "content": "question 0"}], "params": {}}
    assert first.status == "pending"
    assert (second.seq, second.route, second.requested_provider) == (1, "", "beta")
    assert second.payload["params"] == {"max_tokens": 16, "temperature": 0.2}
    assert [m["role"] for m in second.payload["messages"]] == ["system", "user"]


def test_jsonl_submission_with_blank_lines_and_charset(client, routes):
    lines = [json.dumps(item(i)) for i in range(3)]
    body = lines[0] + "\n\n" + lines[1] + "\r\n" + lines[2]  # no trailing newline, CRLF tolerated
    response = client.generic("POST", URL, body, content_type="application/jsonl; charset=utf-8")
    assert response.status_code == 201, response.content
    batch = Batch.objects.get(pk=response.json()["id"])
    assert batch.metadata == {}
    assert list(batch.items.order_by("seq").values_list("seq", "custom_id")) == [
        (0, "c0"),
        (1, "c1"),
        (2, "c2"),
    ]


def test_unicode_content_round_trips(client, routes):
    response = post_jsonl(client, [item(0, query="Grüße, 世界 ✓")])
    assert response.status_code == 201
    assert BatchItem.objects.get().payload["messages"][0]["content"] == "Grüße, 世界 ✓"


def test_submission_queues_start_batch_after_commit(
    client, routes, django_capture_on_commit_callbacks, monkeypatch
):
    calls = []
    fake = types.ModuleType("batches.tasks")
    fake.start_batch = types.SimpleNamespace(delay=calls.append)
    fake.ensure_dispatchers = lambda: None  # enqueue_start also makes sure dispatchers run (with workers)
    fake._reaper = None  # read by tests/conftest.py's engine-thread guard after the test
    monkeypatch.setitem(sys.modules, "batches.tasks", fake)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = post_json(client, {"items": [item(0)]})
    assert response.status_code == 201
    assert len(callbacks) == 1 and calls == []  # nothing is queued before commit
    callbacks[0]()
    assert calls == [response.json()["id"]]


def test_items_limit_is_read_at_request_time(client, routes, row_counts):
    with override_settings(GATEWAY_MAX_ITEMS_PER_BATCH=3):
        response = post_jsonl(client, [item(i) for i in range(4)])
        ok = post_jsonl(client, [item(i) for i in range(3)])
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == "items"
    assert "at most 3" in response.json()["errors"][0]["message"]
    assert ok.status_code == 201


def test_body_over_limit_is_413_and_nothing_read(client, routes, row_counts):
    with override_settings(GATEWAY_MAX_BODY_BYTES=2048):
        response = post_jsonl(client, [item(i, query="x" * 200) for i in range(20)])
    assert response.status_code == 413
    assert response.json()["errors"][0]["field"] == "body"
    assert row_counts() == (0, 0)


def test_item_size_limit(client, routes, row_counts):
    with override_settings(GATEWAY_MAX_ITEM_BYTES=1000):
        jsonl = post_jsonl(client, [item(0), item(1, query="y" * 2000)])
        as_json = post_json(
            client,
            {"items": [item(0), item(1, messages=[{"role": "user", "content": "z" * 1500}], query=DROP)]},
        )
    assert jsonl.status_code == 400 and jsonl.json()["errors"][0]["index"] == 1
    assert jsonl.json()["errors"][0]["field"] == "item"
    assert as_json.status_code == 400 and as_json.json()["errors"][0] == {
        "index": 1,
        "field": "item",
        "message": as_json.json()["errors"][0]["message"],
    }
    assert "at most 1000 bytes" in as_json.json()["errors"][0]["message"]
    assert row_counts() == (0, 0)


def test_error_list_is_capped_at_100_with_total_count(client, routes, row_counts):
    response = post_jsonl(client, [item(i, route="nope") for i in range(150)])
    assert response.status_code == 400
    data = response.json()
    assert len(data["errors"]) == 100 and data["error_count"] == 150
    assert [e["index"] for e in data["errors"]] == list(range(100))
    assert row_counts() == (0, 0)


def test_one_bad_item_among_many_stores_nothing(client, routes, row_counts):
    items = [item(i) for i in range(500)]
    items[321] = item(321, params=[1, 2])
    response = post_jsonl(client, items)
    assert response.status_code == 400
    assert response.json()["errors"] == [
        {"index": 321, "field": "params", "message": "line 322: must be an object, got a list", "line": 322}
    ]
    assert row_counts() == (0, 0)


# (name, body or items, content type, expected status, expected index, expected field)
MALFORMED = [
    ("not json", b"{not json", "application/json", 400, None, "body"),
    ("empty body", b"", "application/json", 400, None, "body"),
    ("body is a list", [item(0)], "application/json", 400, None, "body"),
    ("missing items", {"metadata": {}}, "application/json", 400, None, "items"),
    ("empty items", {"items": []}, "application/json", 400, None, "items"),
    ("empty jsonl", b"\n\n", "application/jsonl", 400, None, "items"),
    ("items not a list", {"items": {"custom_id": "a"}}, "application/json", 400, None, "items"),
    ("unknown top-level key", {"items": [item(0)], "extra": 1}, "application/json", 400, None, "extra"),
    (
        "metadata not an object",
        {"items": [item(0)], "metadata": [1]},
        "application/json",
        400,
        None,
        "metadata",
    ),
    ("null item", {"items": [item(0), None]}, "application/json", 400, 1, "item"),
    ("item is a string", {"items": ["hello"]}, "application/json", 400, 0, "item"),
    (
        "jsonl line not json",
        b'{"custom_id": "a", "route": "intent", "query": "q"}\n{oops\n',
        "application/jsonl",
        400,
        1,
        "item",
    ),
    ("unknown route", {"items": [item(0, route="nope")]}, "application/json", 400, 0, "route"),
    (
        "route only to disabled provider",
        {"items": [item(0, route="dead")]},
        "application/json",
        400,
        0,
        "route",
    ),
    (
        "unknown provider",
        {"items": [item(0, route=DROP, provider="zeta")]},
        "application/json",
        400,
        0,
        "provider",
    ),
    (
        "disabled provider",
        {"items": [item(0, route=DROP, provider="gamma")]},
        "application/json",
        400,
        0,
        "provider",
    ),
    ("both route and provider", {"items": [item(0, provider="alpha")]}, "application/json", 400, 0, "route"),
    ("neither route nor provider", {"items": [item(0, route=DROP)]}, "application/json", 400, 0, "route"),
    ("route not a string", {"items": [item(0, route=7)]}, "application/json", 400, 0, "route"),
    ("neither messages nor query", {"items": [item(0, query=DROP)]}, "application/json", 400, 0, "messages"),
    (
        "both messages and query",
        {"items": [item(0, messages=[{"role": "user", "content": "x"}])]},
        "application/json",
        400,
        0,
        "messages",
    ),
    (
        "duplicate custom_id",
        {"items": [item(0), item(1, custom_id="c0")]},
        "application/json",
        400,
        1,
        "custom_id",
    ),
    ("missing custom_id", {"items": [item(0, custom_id=DROP)]}, "application/json", 400, 0, "custom_id"),
    ("custom_id not a string", {"items": [item(0, custom_id=12)]}, "application/json", 400, 0, "custom_id"),
    (
        "custom_id over 255 chars",
        {"items": [item(0, custom_id="x" * 256)]},
        "application/json",
        400,
        0,
        "custom_id",
    ),
    (
        "messages not a list",
        {"items": [item(0, query=DROP, messages="hi")]},
        "application/json",
        400,
        0,
        "messages",
    ),
    ("messages empty", {"items": [item(0, query=DROP, messages=[])]}, "application/json", 400, 0, "messages"),
    (
        "message not an object",
        {"items": [item(0, query=DROP, messages=["hi"])]},
        "application/json",
        400,
        0,
        "messages[0]",
    ),
    (
        "message without role",
        {"items": [item(0, query=DROP, messages=[{"content": "hi"}])]},
        "application/json",
        400,
        0,
        "messages[0].role",
    ),
    (
        "message with bad role",
        {"items": [item(0, query=DROP, messages=[{"role": "robot", "content": "hi"}])]},
        "application/json",
        400,
        0,
        "messages[0].role",
    ),
    (
        "message without content",
        {"items": [item(0, query=DROP, messages=[{"role": "user"}])]},
        "application/json",
        400,
        0,
        "messages[0].content",
    ),
    ("query not a string", {"items": [item(0, query=["a"])]}, "application/json", 400, 0, "query"),
    ("query empty", {"items": [item(0, query="  ")]}, "application/json", 400, 0, "query"),
    ("params not an object", {"items": [item(0, params="fast")]}, "application/json", 400, 0, "params"),
    (
        "params sets the model",
        {"items": [item(0, params={"model": "x"})]},
        "application/json",
        400,
        0,
        "params.model",
    ),
    (
        "max_tokens not positive",
        {"items": [item(0, params={"max_tokens": 0})]},
        "application/json",
        400,
        0,
        "params.max_tokens",
    ),
    ("unknown item field", {"items": [item(0, prompt="hi")]}, "application/json", 400, 0, "prompt"),
    ("NUL character", {"items": [item(0, query="a\u0000b")]}, "application/json", 400, 0, "item"),
    (
        "lone surrogate",
        b'{"items": [{"custom_id": "a", "route": "intent", "query": "\\ud800"}]}',
        "application/json",
        400,
        0,
        "item",
    ),
    (
        "NaN is not JSON",
        b'{"items": [{"custom_id": "a", "route": "intent", "query": "q", "params": {"temperature": NaN}}]}',
        "application/json",
        400,
        None,
        "body",
    ),
    (
        "Infinity in a jsonl line",
        b'{"custom_id": "a", "route": "intent", "query": "q", "params": {"top_p": Infinity}}',
        "application/jsonl",
        400,
        0,
        "item",
    ),
    (
        "absurdly nested",
        b'{"items": ' + b"[" * 100000 + b"]" * 100000 + b"}",
        "application/json",
        400,
        None,
        "body",
    ),
    (
        "json not utf-8",
        b'{"items": [{"custom_id": "\xff\xfe", "route": "intent", "query": "q"}]}',
        "application/json",
        400,
        None,
        "body",
    ),
    (
        "jsonl not utf-8",
        b'{"custom_id": "a", "route": "intent", "query": "\xc3\x28"}',
        "application/jsonl",
        400,
        None,
        "body",
    ),
    ("wrong content type", {"items": [item(0)]}, "text/plain", 415, None, "Content-Type"),
    ("form content type", b"items=1", "application/x-www-form-urlencoded", 415, None, "Content-Type"),
]


@pytest.mark.parametrize(
    "body, content_type, status, index, field",
    [case[1:] for case in MALFORMED],
    ids=[case[0] for case in MALFORMED],
)
def test_malformed_payload_is_refused_with_field_error_and_nothing_stored(
    client, routes, row_counts, body, content_type, status, index, field
):
    if isinstance(body, dict | list):
        body = json.dumps(body).encode()
    response = client.generic("POST", URL, body, content_type=content_type)
    assert response.status_code == status, response.content
    errors = response.json()["errors"]
    assert any(e["index"] == index and e["field"] == field for e in errors), errors
    assert all(isinstance(e["message"], str) and e["message"] for e in errors)
    assert row_counts() == (0, 0)


def test_twenty_megabyte_query_is_refused(client, routes, row_counts):
    body = json.dumps({"items": [item(0, query="q" * (20 * 1024 * 1024))]})
    response = client.generic("POST", URL, body, content_type="application/json")
    assert response.status_code == 400, response.status_code
    error = response.json()["errors"][0]
    assert (error["index"], error["field"]) == (0, "query"), error
    assert row_counts() == (0, 0)


def test_submission_service_used_directly(team, routes):
    from batches.submission import SubmissionError, submit_batch

    batch = submit_batch(team=team, items=[item(0), item(1)], metadata={"k": "v"})
    assert batch.total_count == 2 and batch.items.count() == 2
    with pytest.raises(SubmissionError) as exc:
        submit_batch(team=team, items=[item(0, route="nope")])
    assert exc.value.status_code == 400 and exc.value.errors[0].field == "route"
    with pytest.raises(SubmissionError) as exc:
        submit_batch(team=team, items=[item(0, params={"temperature": float("nan")})])
    assert (exc.value.errors[0].index, exc.value.errors[0].field) == (0, "item")
    assert Batch.objects.count() == 1


def test_batch_id_is_a_uuid(client, routes):
    response = post_json(client, {"items": [item(0)]})
    assert uuid.UUID(response.json()["id"])


def test_body_limit_is_gateway_setting_not_django_upload_limit(client, routes):
    """The body is read as a stream, so only GATEWAY_MAX_BODY_BYTES applies (not DATA_UPLOAD_MAX_MEMORY_SIZE)."""
    with override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=1024, GATEWAY_MAX_BODY_BYTES=10 * 1024 * 1024):
        response = post_jsonl(client, [item(i, query="x" * 100) for i in range(50)])
    assert response.status_code == 201, response.content
    assert BatchItem.objects.count() == 50


def test_json_with_charset_parameter(client, routes):
    response = client.generic(
        "POST", URL, json.dumps({"items": [item(0)]}), content_type="application/json; charset=utf-8"
    )
    assert response.status_code == 201


def test_chunked_body_without_length_is_411(client, routes, row_counts):
    response = client.generic(
        "POST", URL, b"", content_type="application/jsonl", HTTP_TRANSFER_ENCODING="chunked"
    )
    assert response.status_code == 411
    assert response.json()["errors"][0]["field"] == "Content-Length"
    assert row_counts() == (0, 0)


def test_batch_options_in_json_body_are_stored(client, routes, api_key):
    response = post_json(client, {"items": [item(0)], "priority": "high", "completion_window": "15m"})
    assert response.status_code == 201, response.content
    data = response.json()
    assert data["priority"] == "high" and data["completion_window"] == "15m"
    batch = Batch.objects.get(pk=data["id"])
    assert (batch.expires_at - batch.created_at).total_seconds() == pytest.approx(900, abs=1)


def test_batch_options_for_jsonl_come_from_query_parameters(client, routes, api_key):
    response = post_jsonl(client, [item(0)], url=URL + "?priority=low&completion_window=2h")
    assert response.status_code == 201, response.content
    assert response.json()["priority"] == "low" and response.json()["completion_window"] == "2h"


@pytest.mark.parametrize(
    "options, field",
    [
        ({"priority": "urgent"}, "priority"),
        ({"priority": 1}, "priority"),
        ({"completion_window": "0m"}, "completion_window"),
        ({"completion_window": "9s"}, "completion_window"),
        ({"completion_window": "8d"}, "completion_window"),
        ({"completion_window": "1.5h"}, "completion_window"),
        ({"completion_window": "15 m"}, "completion_window"),
        ({"completion_window": 900}, "completion_window"),
    ],
)
def test_bad_batch_options_are_400_naming_the_field_and_store_nothing(
    client, routes, api_key, options, field
):
    response = post_json(client, {"items": [item(0)], **options})
    assert response.status_code == 400
    assert [e["field"] for e in response.json()["errors"]] == [field]
    assert Batch.objects.count() == 0


@pytest.mark.parametrize("key", sorted(RESERVED_PARAMS))
def test_reserved_params_are_refused_here_and_never_sent_by_the_engine(client, routes, row_counts, key):
    """One constant (gateway_engine.wire.openai.RESERVED_PARAMS): what submission refuses in params is
    exactly what the engine's clients keep out of the request body."""
    response = post_json(client, {"items": [item(0, params={key: "x", "max_tokens": 5})]})
    assert response.status_code == 400, response.content
    assert any(e["field"] == f"params.{key}" for e in response.json()["errors"]), response.json()
    assert row_counts() == (0, 0)

    async def call():
        async with LocalHttp() as server:
            answer = {"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 1}}
            server.on("POST", "/v1/chat/completions", reply(200, json=answer))
            entry = {"name": "p", "base_url": server.url("/v1"), "model": "m", "rpm": 60, "tpm": 1000}
            config = ProviderConfig.from_dict({**entry, "max_concurrency": 1})
            provider = AiohttpProviderClient(config)
            try:
                outcome = await provider.chat(
                    [{"role": "user", "content": "hi"}], {key: "x", "max_tokens": 5}
                )
            finally:
                await provider.aclose()
            return outcome, server.seen

    outcome, seen = asyncio.run(call())
    assert outcome.ok
    assert [s.json() for s in seen] == [
        {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5}
    ]
