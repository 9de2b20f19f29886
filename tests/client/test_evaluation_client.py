"""The client's ``targets=`` (an evaluation, docs/contract.md §4) and ``comparison`` end to end against
the real stack (uvicorn + a Celery worker + the simulator, tests/client/conftest.py)."""

from __future__ import annotations

import csv
import io

import pytest
from batch_gateway_client import BadRequestError, Gateway

from batches.models import Batch
from tests.evals.conftest import TARGETS, eval_targets, questions, sim_config  # noqa: F401 (fixture)

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]


def test_submit_takes_targets_and_reads_the_comparison(stack, sim_server, eval_targets, key):  # noqa: F811
    sim = sim_server(sim_config())
    eval_targets(base_urls=sim.provider_url)
    with Gateway(stack.url, key(), timeout=30) as gw:
        with pytest.raises(BadRequestError) as refused:
            gw.submit(questions(2), targets=["evala", "evalc"])
        assert refused.value.fields == ["targets[1]"] and Batch.objects.count() == 0
        results = gw.batch(questions(5), progress=False, targets=TARGETS)  # one RESULT per item and target
        batch = {"id": Batch.objects.get().id}
        figures = gw.comparison(batch["id"])
        rows = list(csv.DictReader(io.StringIO(gw.comparison_csv(batch["id"]))))
    assert [(r["custom_id"], r["target"]) for r in results] == [
        (q["custom_id"], t) for q in questions(5) for t in TARGETS
    ]
    assert {t: f["ok"] for t, f in figures["per_target"].items()} == dict.fromkeys(TARGETS, 5)
    assert [a["rate"] for a in figures["agreement"]] == [
        0.0,
        1.0,
        0.0,
    ]  # (evala, evalb), (evala, same_a), (evalb, same_a)
    assert [row["custom_id"] for row in rows] == [q["custom_id"] for q in questions(5)]
