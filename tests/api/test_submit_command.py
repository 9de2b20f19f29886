"""manage.py submit_batch FILE.jsonl --team NAME [--wait]."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command

from batches.management.commands import submit_batch as command_module
from batches.models import Batch, BatchItem

from .helpers import item

pytestmark = pytest.mark.django_db


@pytest.fixture
def jsonl_file(tmp_path):
    def write(items, name="batch.jsonl"):
        path = tmp_path / name
        path.write_text("".join(json.dumps(x) + "\n" for x in items))
        return str(path)

    return write


def run(*args):
    out, err = io.StringIO(), io.StringIO()
    call_command("submit_batch", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_submits_and_prints_the_batch_object(jsonl_file, team, routes):
    out, err = run(jsonl_file([item(i) for i in range(4)]), "--team", team.name, "--metadata", '{"run": 1}')
    data = json.loads(out)
    assert (
        data["status"] == "queued" and data["request_counts"]["total"] == 4 and data["metadata"] == {"run": 1}
    )
    assert "submitted batch" in err
    batch = Batch.objects.get(pk=data["id"])
    assert batch.team == team and batch.api_key is None
    assert list(batch.items.order_by("seq").values_list("custom_id", flat=True)) == ["c0", "c1", "c2", "c3"]


def test_wait_shows_progress_until_done(jsonl_file, team, routes, monkeypatch, capsys):
    """The engine is simulated: each poll interval finishes one more item."""
    path = jsonl_file([item(i) for i in range(3)])

    def fake_sleep(_seconds):
        batch = Batch.objects.get()
        nxt = batch.items.filter(status="pending").order_by("seq").first()
        if nxt is not None:
            BatchItem.objects.filter(pk=nxt.pk).update(status="succeeded" if nxt.seq != 1 else "failed")
        if not batch.items.filter(status="pending").exists():
            Batch.objects.filter(pk=batch.pk).update(status="completed", completed_count=2, failed_count=1)

    monkeypatch.setattr(command_module.time, "sleep", fake_sleep)
    out, err = run(path, "--team", team.name, "--wait", "--poll", "0.01")
    data = json.loads(out)
    assert data["status"] == "completed"
    assert data["request_counts"] == {"total": 3, "completed": 2, "failed": 1, "cancelled": 0, "expired": 0}
    # a terminal gets a tqdm bar on the real stderr; elsewhere (here) plain lines on the command's stderr
    progress = capsys.readouterr().err + err
    assert "succeeded=2" in progress and "failed=1" in progress and "pending=0" in progress


def test_wait_timeout(jsonl_file, team, routes, monkeypatch):
    monkeypatch.setattr(command_module.time, "sleep", lambda s: None)
    with pytest.raises(CommandError, match="--timeout"):
        run(jsonl_file([item(0)]), "--team", team.name, "--wait", "--timeout", "0")


def test_invalid_items_are_listed_and_nothing_stored(jsonl_file, team, routes):
    path = jsonl_file([item(0), item(1, route="nope"), item(2, custom_id="c0")])
    err = io.StringIO()
    with pytest.raises(CommandError, match="2 problem"):
        call_command("submit_batch", path, "--team", team.name, stdout=io.StringIO(), stderr=err)
    assert "item 1: route:" in err.getvalue() and "item 2: custom_id:" in err.getvalue()
    assert Batch.objects.count() == 0 and BatchItem.objects.count() == 0


@pytest.mark.parametrize(
    "args, message",
    [
        (["--team", "nobody"], "no team named"),
        (["--team", "acme", "--metadata", "[1]"], "must be a JSON object"),
        (["--team", "acme", "--metadata", "{"], "not valid JSON"),
    ],
)
def test_bad_arguments(jsonl_file, team, routes, args, message):
    with pytest.raises(CommandError, match=message):
        run(jsonl_file([item(0)]), *args)
    assert Batch.objects.count() == 0


def test_missing_file(team):
    with pytest.raises(CommandError, match="No such file"):
        run("/nonexistent/batch.jsonl", "--team", team.name)
