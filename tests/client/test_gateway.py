"""``batch_gateway_client.Gateway`` against the real stack (uvicorn + a default-pool Celery worker +
the simulator, tests/client/conftest.py): a batch of 100 comes back in input order, a bad item is
refused naming its field with nothing stored, a running batch is cancelled, the typed errors, the
idempotent submit, the interactive lane (plain and streamed)."""

from __future__ import annotations

import asyncio
import random

import pytest
from batch_gateway_client import (
    AuthenticationError,
    BadRequestError,
    Gateway,
    NotFoundError,
)

from batches.models import Batch, BatchItem
from tests.waiting import wait_until

from .conftest import sim_provider

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_a_batch_of_100_returns_100_results_in_input_order(
    stack, sim_server, make_provider, make_route, key, capsys
):
    _, gpt = sim_provider(sim_server, make_provider)
    make_route("chat", gpt)
    # custom_ids in no sorted order; item i asks for i+1 tokens, and the simulator answers exactly that
    # many ("[gpt] tok tok …"), so each RESULT shows which item it answers
    ids = [f"q-{n}" for n in random.Random(5).sample(range(1000, 9999), 100)]
    items = [{"custom_id": cid, "route": "chat", "query": f"question {cid}", "params": {"max_tokens": i + 1}}
             for i, cid in enumerate(ids)]  # fmt: skip
    with Gateway(stack.url, key(), timeout=30) as gw:
        results = gw.batch(items, progress=True, metadata={"job": "client-test"})
        assert [r["custom_id"] for r in results] == ids
        assert all(r["ok"] for r in results), [r["error"] for r in results if not r["ok"]][:3]
        assert [r["usage"]["completion_tokens"] for r in results] == list(range(1, 101))
        assert [r["response"]["choices"][0]["message"]["content"].count("tok") for r in results] == list(
            range(1, 101)
        )
        assert "100/100" in capsys.readouterr().err  # the progress bar (tqdm in this venv)

        # the asyncio twin: one batch, RESULTs in input order; items without custom_id get their position
        short = [{"route": "chat", "query": f"a{i}", "params": {"max_tokens": 5 - i}} for i in range(5)]
        answers = asyncio.run(gw.abatch(short, progress=False, priority="high"))
        assert [r["custom_id"] for r in answers] == ["0", "1", "2", "3", "4"]
        assert [r["usage"]["completion_tokens"] for r in answers] == [5, 4, 3, 2, 1]

        batch = Batch.objects.get(metadata={"job": "client-test"})
        assert gw.retrieve(str(batch.id))["status"] == "completed"
        assert len(list(gw.results(str(batch.id), status="succeeded"))) == 100
        usage = gw.usage(group_by="provider")
        assert usage["results"][0]["provider"] == "gpt" and usage["totals"]["completion_tokens"] >= 5050


def test_a_bad_item_raises_naming_the_field_and_nothing_is_stored(
    stack, sim_server, make_provider, make_route, key
):
    _, gpt = sim_provider(sim_server, make_provider)
    make_route("chat", gpt)
    items = [{"custom_id": f"q{i}", "route": "chat", "query": "hi"} for i in range(100)]
    items[17]["params"] = {"max_tokens": 0}
    items[42] = {"custom_id": "q42", "provider": "nope", "query": "hi"}
    gw = Gateway(stack.url, key())
    with pytest.raises(BadRequestError) as caught:
        gw.batch(items, progress=False)
    error = caught.value
    assert error.status_code == 400
    assert [(e.index, e.field) for e in error.errors] == [(17, "params.max_tokens"), (42, "provider")]
    assert error.fields == ["params.max_tokens", "provider"] and error.error_count == 2
    assert "item 17: params.max_tokens" in str(error) and "item 42: provider" in str(error)
    assert Batch.objects.count() == 0 and BatchItem.objects.count() == 0
    # an unknown batch option is named too
    with pytest.raises(BadRequestError) as caught:
        gw.submit(items[:1], priority="urgent")
    assert caught.value.fields == ["priority"]
    assert Batch.objects.count() == 0


def test_cancel_stops_a_running_batch(stack, sim_server, make_provider, make_route, key):
    # 2 requests a second: 40 items take 20 s, the cancel comes after the first few answers
    _, slow = sim_provider(
        sim_server, make_provider, name="slow", rpm=120, burst_seconds=1.0, max_concurrency=2
    )
    gw = Gateway(stack.url, key())
    created = gw.batch([{"provider": "slow", "query": f"q{i}"} for i in range(40)], wait=False)
    batch_id = created["id"]
    assert created["status"] == "queued"
    wait_until(
        lambda: gw.retrieve(batch_id)["request_counts"]["completed"] >= 2, 30, what="the first answers"
    )
    assert gw.cancel(batch_id)["status"] == "cancelled"
    final = gw.wait(batch_id, wait_timeout=30)
    counts = final["request_counts"]
    assert final["status"] == "cancelled" and final["completed_at"] is not None
    assert counts["cancelled"] >= 20 and counts["completed"] + counts["cancelled"] + counts["failed"] == 40, (
        counts
    )
    cancelled = list(gw.results(batch_id, status="cancelled"))
    assert len(cancelled) == counts["cancelled"]
    assert {r["error"]["type"] for r in cancelled} == {"cancelled"}
    assert BatchItem.objects.filter(batch_id=batch_id, status="cancelled").count() == counts["cancelled"]


def test_typed_errors_and_an_idempotent_submit(stack, sim_server, make_provider, make_route, key):
    _, gpt = sim_provider(sim_server, make_provider)
    make_route("chat", gpt)
    raw = key()
    with pytest.raises(AuthenticationError) as caught:
        Gateway(stack.url, "bgw_not-a-key").retrieve("00000000-0000-0000-0000-000000000000")
    assert caught.value.status_code == 401 and caught.value.detail
    gw = Gateway(stack.url, raw)
    with pytest.raises(NotFoundError) as caught:
        gw.retrieve("00000000-0000-0000-0000-000000000000")
    assert caught.value.detail == "batch not found"
    with pytest.raises(NotFoundError):
        list(gw.results("00000000-0000-0000-0000-000000000000"))
    items = [{"custom_id": "a", "route": "chat", "query": "hi"}]
    first = gw.submit(items, idempotency_key="order-77")
    again = gw.submit(items, idempotency_key="order-77")  # what a retried POST gets: the first batch
    assert again["id"] == first["id"] and Batch.objects.count() == 1
    gw.wait(first["id"], wait_timeout=30)


def test_chat_plain_and_streamed(stack, sim_server, make_provider, make_route, key):
    _, gpt = sim_provider(sim_server, make_provider, sim={"stream_chunks": 3})
    make_route("chat", gpt)
    gw = Gateway(stack.url + "/v1", key())  # an OpenAI-style base URL names the same gateway
    answer = gw.chat("chat", "hello", max_tokens=4)
    assert answer["object"] == "chat.completion" and answer["usage"]["completion_tokens"] == 4
    with gw.chat("chat", [{"role": "user", "content": "hello"}], stream=True, max_tokens=4,
                 stream_options={"include_usage": True}) as stream:  # fmt: skip
        chunks = list(stream)
    assert stream.provider == "gpt"
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == answer["choices"][0]["message"]["content"]
    assert chunks[-1]["usage"]["completion_tokens"] == 4
    with pytest.raises(NotFoundError) as caught:
        gw.chat("no-such-model", "hello")
    assert caught.value.code == "model_not_found" and caught.value.fields == ["model"]
    assert asyncio.run(gw.achat("chat", "hi", max_tokens=2))["usage"]["completion_tokens"] == 2
    assert {m["id"] for m in gw.models()} >= {"chat", "gpt"}
