"""Bad lines of an embeddings batch through the real openai SDK (issue #39): one ``failed`` batch whose
``errors`` name every bad line as OpenAI reports them (line, ``param``, ``code``), and nothing runs;
an Anthropic-kind provider serves no embeddings, said on the line's ``body.model``."""

from __future__ import annotations

import pytest

from batches.models import Batch
from sim.testing import run_simulator_in_thread

from .conftest import jsonl
from .test_sdk_errors import SIM

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]


@pytest.fixture
def sim():
    with run_simulator_in_thread(SIM) as handle:
        yield handle


def line(custom_id: str, model: str = "embed", url: str = "/v1/embeddings", **body) -> dict:
    return {"custom_id": custom_id, "method": "POST", "url": url, "body": {"model": model, **body}}


def test_bad_embedding_lines_make_a_failed_batch_naming_each_line(
    client_for, team, sim, make_provider, make_route
):
    make_route(
        "embed", make_provider("fast", base_url=sim.provider_url("fast"), model="text-embedding-3-small")
    )
    make_provider("claude", kind="anthropic", base_url=sim.provider_url("fast"))
    client = client_for(team)
    lines = [
        line("ok", input="a chunk"),
        line("empty", input=""),
        line("nothing"),  # no input
        line("holes", input=["fine", ""]),
        line("chat", url="/v1/chat/completions", messages=[{"role": "user", "content": "hi"}]),
        line("claude", model="claude", input="x"),
    ]
    file = client.files.create(file=jsonl(lines), purpose="batch")
    batch = client.batches.create(input_file_id=file.id, endpoint="/v1/embeddings", completion_window="24h")
    assert batch.status == "failed" and batch.output_file_id is None
    found = [(e.line, e.param, e.code) for e in batch.errors.data]
    assert found == [
        (2, "body.input", "invalid_request"),
        (3, "body.input", "invalid_request"),
        (4, "body.input", "invalid_request"),
        (5, "url", "invalid_url"),
        (6, "body.model", "model_not_found"),
    ], batch.errors.data
    assert "anthropic" in {e.line: e.message for e in batch.errors.data}[6]
    assert Batch.objects.count() == 0 and sim.counters()["totals"]["requests"] == 0
