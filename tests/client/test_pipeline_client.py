"""The client's ``steps=`` (a pipeline, docs/contract.md §4) end to end against the real stack (uvicorn +
a Celery worker + the simulator, tests/client/conftest.py): what the gateway refused and what every
step sent."""

from __future__ import annotations

import pytest
from batch_gateway_client import BadRequestError, Gateway

from batches.models import Batch
from tests.pipelines.conftest import STEPS, docs, make_pipeline_providers, seen_once, sim_config

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]


def test_submit_and_batch_take_steps(stack, sim_server, make_provider, make_route, key):
    sim = sim_server(sim_config(median_ms=5))
    make_pipeline_providers(sim, make_provider, make_route)
    with Gateway(stack.url, key(), timeout=30) as gw:
        with pytest.raises(BadRequestError) as refused:
            gw.submit(docs(2), steps=[STEPS[0], {**STEPS[1], "template": "{steps.clasify}"}])
        assert refused.value.fields == ["steps[1].template"] and Batch.objects.count() == 0
        results = gw.batch(docs(10), progress=False, steps=STEPS)
    assert [r["custom_id"] for r in results] == [f"d{i:04d}" for i in range(10)]
    assert all(r["ok"] and [s["name"] for s in r["steps"]] == ["classify", "summary"] for r in results)
    seen_once(sim, results)
