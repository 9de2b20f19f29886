"""Cancel through the SDK in single-process mode (the batch runs on a background thread of the web
process): `cancelling` while calls are in flight, then `cancelled`; every request not sent gets an
error-file line with code batch_cancelled, the ones that finished are in the output file, and the
provider saw exactly those."""

from __future__ import annotations

import threading
import time

import pytest
from django.test import override_settings

from openai_api.models import OpenAIBatch
from sim.testing import run_simulator_in_thread

from .conftest import jsonl, read_jsonl, request_line

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]

SIM = {
    "time_scale": 1,
    "seed": 5,
    "providers": {"slow": {"rpm": 100000, "tpm": 100000000, "median_ms": 1500, "sigma": 0.05}},
}


@override_settings(GATEWAY_BACKGROUND_EAGER=True)
def test_cancel_is_cancelling_then_cancelled_with_an_error_line_per_unsent_request(
    client_for, team, make_provider, make_route, redis_sync
):
    client = client_for(team)
    with run_simulator_in_thread(SIM) as sim:
        provider = make_provider(
            "slow", base_url=sim.provider_url("slow"), rpm=60000, tpm=10**8, max_concurrency=2
        )
        make_route("chat", provider)
        lines = [request_line(f"c{i:02d}", "chat", max_tokens=4) for i in range(20)]
        file = client.files.create(file=jsonl(lines), purpose="batch")
        batch = client.batches.create(
            input_file_id=file.id, endpoint="/v1/chat/completions", completion_window="15m"
        )
        assert batch.status == "in_progress"
        deadline = time.monotonic() + 30
        while sim.counters()["providers"]["slow"]["requests"] < 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert sim.counters()["providers"]["slow"]["requests"] >= 1

        cancelling = client.batches.cancel(batch.id)
        assert cancelling.status == "cancelling"  # two calls are still in flight
        assert cancelling.cancelling_at is not None and cancelling.cancelled_at is None

        deadline = time.monotonic() + 30
        while (
            done := client.batches.retrieve(batch.id)
        ).status == "cancelling" and time.monotonic() < deadline:
            time.sleep(0.1)
        assert done.status == "cancelled"
        assert done.cancelled_at >= done.cancelling_at
        sent = sim.counters()["providers"]["slow"]["requests"]
        native_id = OpenAIBatch.objects.get(pk=batch.id).batch_id
        for t in threading.enumerate():
            if t.name == f"batch-{native_id}":
                t.join(timeout=10)

    output = read_jsonl(client.files.content(done.output_file_id).text) if done.output_file_id else []
    errors = read_jsonl(client.files.content(done.error_file_id).text)
    assert sorted(x["custom_id"] for x in output + errors) == [x["custom_id"] for x in lines]
    assert len(output) == sent < 20  # the in-flight calls finished and are in the output file
    assert len(errors) == 20 - sent
    for line in errors:
        assert line["response"] is None
        assert line["error"]["code"] == "batch_cancelled"
        assert line["error"]["message"]
    assert done.request_counts.total == 20
    assert (done.request_counts.completed, done.request_counts.failed) == (len(output), len(errors))
