"""Submission puts each item in its preferred provider's queue; submit_batch takes the batch options."""

from __future__ import annotations

import io
import json
from collections import Counter

import pytest
from django.core.management import CommandError, call_command

from batches.execution import load_routing_table
from batches.models import Batch, BatchItem
from gateway_engine.routing import candidates, stable_draw

from .conftest import queue_batch

pytestmark = pytest.mark.django_db


def test_queue_provider_is_the_engines_first_choice(make_provider, make_route, team):
    a, b = make_provider("qa"), make_provider("qb")
    make_route("qroute", a, weight=1)
    make_route("qroute", b, weight=3)
    items = [{"custom_id": f"r{i}", "route": "qroute", "query": "hi"} for i in range(200)]
    items += [
        {"custom_id": "direct", "provider": "qb", "query": "hi"},
    ]
    batch = queue_batch(team, items)
    table = load_routing_table()
    rows = {r.custom_id: r for r in BatchItem.objects.filter(batch=batch)}
    for cid in (f"r{i}" for i in range(200)):
        expected = candidates(table, route="qroute", draw=stable_draw(str(batch.id), cid))[0].name
        assert rows[cid].queue_provider == expected, cid
    split = Counter(rows[f"r{i}"].queue_provider for i in range(200))
    assert set(split) == {"qa", "qb"} and split["qb"] > split["qa"]  # weighted 1:3
    assert rows["direct"].queue_provider == "qb"


@pytest.fixture
def jsonl(tmp_path):
    path = tmp_path / "b.jsonl"
    path.write_text(json.dumps({"custom_id": "1", "provider": "cmdp", "query": "hi"}) + "\n")
    return str(path)


def test_submit_batch_command_takes_priority_and_window(jsonl, team, make_provider):
    make_provider("cmdp")
    out = io.StringIO()
    call_command(
        "submit_batch", jsonl, "--team", team.name, "--priority", "high", "--completion-window", "15m",
        stdout=out, stderr=io.StringIO(),
    )  # fmt: skip
    data = json.loads(out.getvalue())
    assert (data["priority"], data["completion_window"]) == ("high", "15m")
    batch = Batch.objects.get(id=data["id"])
    assert (
        batch.expires_at is not None and 899 <= (batch.expires_at - batch.created_at).total_seconds() <= 901
    )


@pytest.mark.parametrize(
    "args, field",
    [(["--priority", "urgent"], "priority"), (["--completion-window", "5x"], "completion_window")],
)
def test_submit_batch_command_names_the_bad_option(jsonl, team, make_provider, args, field):
    make_provider("cmdp")
    err = io.StringIO()
    with pytest.raises(CommandError, match="nothing was stored"):
        call_command("submit_batch", jsonl, "--team", team.name, *args, stdout=io.StringIO(), stderr=err)
    assert f"body: {field}:" in err.getvalue()
    assert not Batch.objects.exists()
