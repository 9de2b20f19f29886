"""The request log's records and retention, without a server: what a call leaves behind (log row,
TeamUsageDaily increments, the content only for teams that opted in) and what purge_old_data removes."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from batches.models import TeamUsageDaily
from gateway_engine.items import ItemResult
from interactive.models import InteractiveCall
from interactive.records import CallRecord, usage_rows, write
from observability.retention import purge_old_data

pytestmark = pytest.mark.django_db(transaction=True)  # write() closes its thread's connection


def record(team, call_id="c1", created=None, **kw) -> CallRecord:
    result = ItemResult(call_id, "succeeded", provider="gpt", attempts=2, prompt_tokens=10, completion_tokens=5,
                        total_tokens=15, attempt_log=[
                            {"provider": "claude", "status_code": 529, "error_type": "overloaded", "latency_ms": 3,
                             "prompt_tokens": 0, "completion_tokens": 0, "tokens": 0, "used": False, "at": "x"},
                            {"provider": "gpt", "status_code": 200, "error_type": "", "latency_ms": 3,
                             "prompt_tokens": 10, "completion_tokens": 5, "tokens": 15, "used": True, "at": "y"}])  # fmt: skip
    return CallRecord(call_id=call_id, created_at=created or timezone.now(), team_id=team.pk, api_key_id=None,
                      model="chat", route="chat", stream=False, http_status=200, result=result, latency_ms=7,
                      queue_ms=None, **kw)  # fmt: skip


def test_a_call_counts_every_attempt_at_its_provider_and_the_item_at_the_one_that_answered(team):
    rows = sorted(usage_rows([record(team), record(team, "c2")]))
    day = timezone.now().date()
    #   team, provider, day, requests, ok, failed, prompt, completion, wasted, cached, cache_write,
    #   provider-batch prompt / completion (none: real time), endpoint
    assert rows == [
        (team.pk, "claude", day, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, "chat"),
        (team.pk, "gpt", day, 2, 2, 0, 20, 10, 0, 0, 0, 0, 0, "chat"),
    ]
    write([record(team), record(team, "c2")])
    usage = {
        u.provider: (u.requests, u.items_succeeded, u.prompt_tokens) for u in TeamUsageDaily.objects.all()
    }
    assert usage == {"claude": (2, 0, 0), "gpt": (2, 2, 20)}
    assert InteractiveCall.objects.count() == 2


def test_usage_is_counted_per_endpoint_the_call_came_in_on(team):
    write(
        [record(team), record(team, "e1", endpoint="embeddings"), record(team, "e2", endpoint="embeddings")]
    )
    usage = {
        (u.provider, u.endpoint): (u.requests, u.items_succeeded, u.prompt_tokens)
        for u in TeamUsageDaily.objects.all()
    }
    assert usage == {
        ("claude", "chat"): (1, 0, 0),
        ("gpt", "chat"): (1, 1, 10),
        ("claude", "embeddings"): (2, 0, 0),
        ("gpt", "embeddings"): (2, 2, 20),
    }


def test_retention_deletes_old_rows_and_drops_kept_content(team, settings):
    settings.GATEWAY_INTERACTIVE_LOG_RETENTION_DAYS = 30
    now = timezone.now()
    write([record(team, "old", now - dt.timedelta(days=31)),
           record(team, "week", now - dt.timedelta(days=8), request_body={"p": 1}, response_body={"a": 1}),
           record(team, "new", now, request_body={"p": 2}, response_body={"a": 2})])  # fmt: skip
    report = purge_old_data(7, now=now)
    assert report.purged["interactive_calls"] == 2  # one deleted, one emptied
    kept = {c.call_id: (c.request_body, c.response_body) for c in InteractiveCall.objects.all()}
    assert kept == {"week": (None, None), "new": ({"p": 2}, {"a": 2})}
    assert (
        purge_old_data(None, now=now).purged.get("interactive_calls") is None
    )  # nothing left, retention off
