"""Hostile submissions are refused with a clear error naming the field, nothing stored (#13)."""

from __future__ import annotations

import gc
import json

import pytest

from batches.models import Batch, BatchItem
from batches.submission import SubmissionError, parse_body, submit_body
from batches.submission.json_values import contains_nul

MAX_CONTENT_PARTS, MAX_MESSAGES, MAX_PARAMS_DEPTH = 100, 1000, 8  # batches.submission's limits

pytestmark = pytest.mark.django_db
URL = "/api/v1/batches"


def post(client, data, content_type="application/json"):
    return client.generic("POST", URL, data, content_type=content_type)


def errors(response):
    return [(e["index"], e["field"], e["message"]) for e in response.json()["errors"]]


def test_a_body_of_nested_lists_is_refused_before_parsing():
    """Pre-fix: parsed in full (~30x its size in Python objects, GC paused) before any count."""
    bomb = b'{"items": [' + b"[]," * 400_000 + b'{"custom_id": "a", "route": "intent", "query": "q"}]}'
    with pytest.raises(SubmissionError) as exc:
        parse_body(bomb, "application/json")
    assert (
        exc.value.errors[0].field == "body" and "too many JSON objects/lists" in exc.value.errors[0].message
    )
    jsonl = b"\n".join([b'{"custom_id": "a", "route": "intent", "messages": [' + b"[]," * 5000 + b"[]]}"] * 3)
    with pytest.raises(SubmissionError):
        parse_body(jsonl, "application/jsonl")


def test_brackets_inside_strings_do_not_count():
    code = "def f(x): return [[x], {x: [x]}]" * 2000  # 12 000 brackets in one string
    body = json.dumps({"items": [{"custom_id": "a", "route": "intent", "query": code}]}).encode()
    assert len(parse_body(body, "application/json").items) == 1


def test_content_parts_messages_and_params_are_bounded(client, route):
    many_parts = [{"type": "text", "text": "x"}] * (MAX_CONTENT_PARTS + 1)
    deep = {"type": "text", "text": "x"}
    node = deep
    for _ in range(MAX_PARAMS_DEPTH + 2):
        node["extra"] = {}
        node = node["extra"]
    deep_params = {}
    node = deep_params
    for _ in range(MAX_PARAMS_DEPTH + 2):
        node["x"] = {}
        node = node["x"]
    items = [
        {"custom_id": "a", "route": "intent", "messages": [{"role": "user", "content": many_parts}]},
        {
            "custom_id": "b",
            "route": "intent",
            "messages": [{"role": "user", "content": "x"}] * (MAX_MESSAGES + 1),
        },
        {"custom_id": "c", "route": "intent", "messages": [{"role": "user", "content": [deep]}]},
        {"custom_id": "d", "route": "intent", "query": "q", "params": deep_params},
        {"custom_id": "e", "route": "intent", "messages": [{"role": "user", "content": ["not an object"]}]},
    ]
    response = post(client, json.dumps({"items": items}))
    assert response.status_code == 400
    fields = {(index, field) for index, field, _ in errors(response)}
    assert fields == {
        (0, "messages[0].content"),
        (1, "messages"),
        (2, "messages[0].content[0]"),
        (3, "params"),
        (4, "messages[0].content[0]"),
    }
    assert Batch.objects.count() == BatchItem.objects.count() == 0


@pytest.mark.parametrize("custom_id", ["a\tb", "line\nbreak", "bell\x07", "del\x7f", "c1\x85", "nul\x00"])
def test_control_characters_in_custom_id_are_refused(client, route, custom_id):
    """Pre-fix: only NUL was refused."""
    response = post(
        client, json.dumps({"items": [{"custom_id": custom_id, "route": "intent", "query": "q"}]})
    )
    assert response.status_code == 400
    assert errors(response)[0][:2] == (0, "custom_id")
    assert "control characters" in errors(response)[0][2]


def test_deep_nesting_never_overflows_the_stack(client, route):
    """Pre-fix: _contains_nul recursed (~400 levels of metadata with a NUL escape → 500)."""
    deep: object = "\x00"
    for _ in range(5000):
        deep = [deep]
    assert contains_nul(deep) is True
    nested = "[" * 600 + '"\\u0000"' + "]" * 600
    body = (
        '{"items": [{"custom_id": "a", "route": "intent", "query": "q"}], "metadata": {"m": ' + nested + "}}"
    )
    response = post(client, body)
    assert response.status_code == 400
    assert errors(response)[0][1] == "metadata"
    params = (
        '{"items": [{"custom_id": "a", "route": "intent", "query": "q", "params": {"p": ' + nested + "}}]}"
    )
    response = post(client, params)
    assert response.status_code == 400 and errors(response)[0][1] in ("params", "item")


def test_gc_is_not_paused_for_the_whole_request(team, route, monkeypatch):
    """GC is re-enabled between validation slices: seen enabled at least once mid-validation."""
    monkeypatch.setattr("batches.submission.validation.GC_SLICE_ITEMS", 10)
    monkeypatch.setattr("batches.submission.enqueue.enqueue_start", lambda batch_id: None)
    seen = []
    from batches.submission import validation

    original = validation.ItemValidator.item

    def spy(self, i, item, raw_size):
        seen.append(gc.isenabled())
        return original(self, i, item, raw_size)

    monkeypatch.setattr(validation.ItemValidator, "item", spy)
    pauses = []
    original_pause = validation.paused_gc

    def counting_pause():
        pauses.append(1)
        return original_pause()

    monkeypatch.setattr(validation, "paused_gc", counting_pause)
    body = json.dumps({"items": [{"custom_id": f"c{i}", "route": "intent", "query": "q"} for i in range(35)]})
    assert gc.isenabled()
    submit_body(team=team, body=body.encode(), content_type="application/json")
    assert len(seen) == 35 and not any(seen)  # paused while validating a slice …
    assert len(pauses) == 4  # … one pause per slice of 10 (35 items), re-enabled in between
    assert gc.isenabled()  # … and on again afterwards


def test_upload_memory_limit_is_djangos_default(settings):
    """Pre-fix: 100 MB for every endpoint (an anonymous POST to /admin/login/ could buffer 100 MB)."""
    assert settings.DATA_UPLOAD_MAX_MEMORY_SIZE == 2_621_440


def test_admin_login_refuses_a_large_form(client):
    from django.test import Client

    big = "x" * (3 * 1024 * 1024)
    response = Client().post("/admin/login/", {"username": big, "password": "p"})
    assert response.status_code == 400
