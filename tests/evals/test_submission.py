"""The ``targets`` batch option at submission (no workers): the fan-out stored, and every refusal naming
the field, with nothing stored."""

from __future__ import annotations

import io
import json

import pytest
from rest_framework.test import APIClient

from batches import submission
from batches.models import Batch, BatchItem
from batches.submission import SubmissionError

from .conftest import TARGETS, questions

pytestmark = pytest.mark.django_db


def submit(team, targets, items=None, **kw):
    saved = submission.enqueue.enqueue_start
    submission.enqueue.enqueue_start = lambda batch_id: None
    try:
        items = items if items is not None else questions(2)
        return submission.submit_batch(team=team, items=items, targets=targets, **kw)
    finally:
        submission.enqueue.enqueue_start = saved


def refusals(team, targets, items=None, **kw) -> dict[str, str]:
    with pytest.raises(SubmissionError) as caught:
        submit(team, targets, items, **kw)
    assert not Batch.objects.exists() and not BatchItem.objects.exists()  # nothing half-stored
    return {e.field if e.index is None else f"{e.index}.{e.field}": e.message for e in caught.value.errors}


def test_every_item_is_stored_once_per_target_queued_at_its_provider(team, eval_targets):
    eval_targets()
    batch = submit(team, TARGETS, questions(3))
    assert batch.targets == TARGETS and batch.total_count == 9
    rows = list(
        BatchItem.objects.filter(batch=batch)
        .order_by("seq")
        .values_list("seq", "custom_id", "target", "route", "requested_provider", "queue_provider")
    )
    assert rows[:3] == [
        (0, "q000@evala", "evala", "", "evala", "evala"),
        (1, "q000@evalb", "evalb", "", "evalb", "evalb"),
        (2, "q000@same_a", "same_a", "same_a", "", "evala"),  # the route's provider's queue
    ]
    assert [r[1] for r in rows[3:6]] == ["q001@evala", "q001@evalb", "q001@same_a"]
    results = list(submission_results(batch))
    assert [(r["custom_id"], r["target"]) for r in results[:3]] == [
        ("q000", "evala"),
        ("q000", "evalb"),
        ("q000", "same_a"),
    ]


def submission_results(batch):
    from batches.selectors import iter_results

    return iter_results(batch)


def test_the_budget_check_counts_every_copy(team, eval_targets):
    from batches.submission.budget import estimate_payload_tokens
    from batches.submission.service import validate_items

    eval_targets()
    once = validate_items([{**q, "provider": "evala"} for q in questions(4)])
    thrice = validate_items(questions(4), fan=tuple(TARGETS))
    assert len(thrice) == 3 * len(once) == 12
    per_item = estimate_payload_tokens(v.payload for v in once)
    assert per_item > 0 and estimate_payload_tokens(v.payload for v in thrice) == 3 * per_item


def test_a_budget_too_small_for_the_copies_is_refused(team, eval_targets, redis_sync):
    from batches.submission import BudgetRefused
    from batches.submission.budget import estimate_payload_tokens
    from batches.submission.service import validate_items

    eval_targets()
    one_copy_each = estimate_payload_tokens(
        v.payload for v in validate_items(questions(2), fan=("evala", "evalb"))
    )
    team.daily_token_budget = one_copy_each + 1  # room for 2 targets, not 3
    team.save()
    with pytest.raises(BudgetRefused):
        submit(team, TARGETS)
    assert not Batch.objects.exists()
    assert submit(team, ["evala", "evalb"]).total_count == 4


@pytest.mark.parametrize(
    ("targets", "field", "words"),
    [
        ("evala", "targets", "must be a list of 2 to 8"),
        (["evala"], "targets", "got 1 names"),
        (["evala", "evalx"], "targets[1]", "did you mean"),
        (["evala", "evaloff"], "targets[1]", "disabled"),
        (["evala", 3], "targets[1]", "a string), got a number"),
        (["", "evala"], "targets[0]", "must not be empty"),
        (["evala", "evala"], "targets[1]", "duplicate target 'evala'; first given as targets[0]"),
    ],
)
def test_a_bad_targets_list_is_refused_naming_the_entry(team, eval_targets, targets, field, words):
    eval_targets()
    got = refusals(team, targets)
    assert words in got[field], got


def test_items_of_their_own_target_steps_and_embeddings_are_refused(team, eval_targets):
    eval_targets()
    own = [{"custom_id": "a", "provider": "evala", "query": "x"}, {"custom_id": "b", "query": "y"}]
    assert "leave it out" in refusals(team, TARGETS, own)["0.provider"]
    steps = [{"name": "s", "provider": "evala"}]
    assert "cannot go with steps" in refusals(team, TARGETS, steps=steps)["targets"]
    embed = [{"custom_id": "e", "endpoint": "embeddings", "input": "x"}]
    assert "chat items only" in refusals(team, TARGETS, embed)["0.endpoint"]
    long_id = [{"custom_id": "x" * 200, "query": "x"}]
    assert "at most 190" in refusals(team, TARGETS, long_id)["0.custom_id"]


def test_the_rest_api_takes_targets_and_refuses_naming_the_field(team, api_key, eval_targets):
    eval_targets()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key[1]}")
    saved = submission.enqueue.enqueue_start
    submission.enqueue.enqueue_start = lambda batch_id: None
    try:
        bad = client.post(
            "/api/v1/batches", {"items": questions(1), "targets": ["evala", "evlab"]}, format="json"
        )
        assert bad.status_code == 400
        assert [e["field"] for e in bad.json()["errors"]] == ["targets[1]"]
        assert not Batch.objects.exists()
        ok = client.post("/api/v1/batches", {"items": questions(2), "targets": TARGETS}, format="json")
        assert ok.status_code == 201, ok.content
        body = ok.json()
        assert body["targets"] == TARGETS and body["request_counts"]["total"] == 6
        lines = "\n".join(json.dumps(q) for q in questions(2))
        jsonl = client.generic(
            "POST", "/api/v1/batches?targets=evala,same_a", lines, content_type="application/jsonl"
        )
        assert jsonl.status_code == 201 and jsonl.json()["targets"] == ["evala", "same_a"]
        no_eval = client.get(f"/api/v1/batches/{jsonl.json()['id']}/comparison")
        assert no_eval.status_code == 200
        plain = client.post(
            "/api/v1/batches",
            {"items": [{"custom_id": "p", "provider": "evala", "query": "x"}]},
            format="json",
        )
        missing = client.get(f"/api/v1/batches/{plain.json()['id']}/comparison")
        assert missing.status_code == 404 and "not an evaluation" in missing.json()["detail"]
    finally:
        submission.enqueue.enqueue_start = saved


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("Paris", "  paris.\n", True),
        ("New   York", "new york!", True),
        ("YES", "yes", True),
        ("Straße", "STRASSE", True),  # case-folded, not just lower-cased
        ("42", "42.0", False),
        ("yes", "no", False),
        ("a b", "ab", False),
    ],
)
def test_answers_are_compared_normalised(a, b, same):
    from batches.evaluation import normalised

    assert (normalised(a) == normalised(b)) is same


def test_a_copy_id_goes_back_to_the_items_own():
    from batches.evaluation import copy_id, own_id

    assert own_id(copy_id("q@1", "same_a"), "same_a") == "q@1"  # an "@" in the item's own id is kept
    assert own_id("plain", "") == "plain"


def test_submit_batch_command_takes_targets(team, eval_targets, tmp_path):
    from django.core.management import CommandError, call_command

    eval_targets()
    path = tmp_path / "q.jsonl"
    path.write_text("\n".join(json.dumps(q) for q in questions(2)))
    saved = submission.enqueue.enqueue_start
    submission.enqueue.enqueue_start = lambda batch_id: None
    try:
        with pytest.raises(CommandError):
            call_command("submit_batch", str(path), team="acme", targets="evala,evalq", stderr=io.StringIO())
        assert not Batch.objects.exists()
        call_command("submit_batch", str(path), team="acme", targets="evala,evalb", stdout=io.StringIO())
    finally:
        submission.enqueue.enqueue_start = saved
    batch = Batch.objects.get()
    assert batch.targets == ["evala", "evalb"] and batch.total_count == 4
