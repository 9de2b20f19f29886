"""The ``steps`` batch option at submission (no workers): what is stored for a pipeline, and every
refusal naming the step and the field, with nothing stored."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from batches import submission
from batches.models import Batch, BatchItem
from batches.submission import SubmissionError
from batches.submission.budget import estimate_payload_tokens
from batches.submission.pipeline_items import step_payloads
from batches.submission.service import known_targets
from batches.submission.steps import check_steps
from teams.models import Team

pytestmark = pytest.mark.django_db

CLASSIFY = {"name": "classify", "route": "classify", "template": "Label this: {input}"}
SUMMARY = {
    "name": "summary",
    "template": "Summarise ({steps.classify}): {input}",
    "route_by": {"Urgent": "sum_a", "*": "sum_b"},
    "params": {"max_tokens": 50},
}


@pytest.fixture
def routes(make_provider, make_route):
    made = {n: make_provider(n) for n in ("clsa", "suma", "sumb")}
    make_provider("off", enabled=False)
    make_route("classify", made["clsa"])
    make_route("sum_a", made["suma"])
    make_route("sum_b", made["sumb"])
    return made


def submit(team, steps, items=None, queue=lambda batch_id: None, **kw):
    saved = submission.enqueue.enqueue_start
    submission.enqueue.enqueue_start = queue
    try:
        items = items if items is not None else [{"custom_id": "a", "query": "the roof leaks"}]
        return submission.submit_batch(team=team, items=items, steps=steps, **kw)
    finally:
        submission.enqueue.enqueue_start = saved


def refusals(team, steps, items=None) -> dict[str, str]:
    with pytest.raises(SubmissionError) as caught:
        submit(team, steps, items)
    assert not Batch.objects.exists() and not BatchItem.objects.exists()  # nothing half-stored
    return {e.field if e.index is None else f"{e.index}.{e.field}": e.message for e in caught.value.errors}


def test_a_pipeline_is_stored_at_its_first_step(team, routes):
    items = [
        {"custom_id": "a", "query": "the roof leaks", "params": {"temperature": 0}},
        {"custom_id": "b", "provider": "suma", "messages": [{"role": "user", "content": "one"}]},
    ]
    batch = submit(team, [CLASSIFY, SUMMARY], items, options=submission.BatchOptions(provider_batch="auto"))
    assert [s["name"] for s in batch.steps] == ["classify", "summary"]
    assert batch.steps[1]["route_by"] == {"Urgent": "sum_a", "*": "sum_b"}
    assert batch.provider_batch == "never"  # every step after the first is sent in real time
    with pytest.raises(SubmissionError) as caught:
        submit(team, [CLASSIFY], options=submission.BatchOptions(provider_batch="always"))
    assert caught.value.errors[0].field == "provider_batch" and Batch.objects.count() == 1
    a, b = BatchItem.objects.filter(batch=batch).order_by("seq")
    assert (a.route, a.requested_provider, a.queue_provider, a.step_index) == ("classify", "", "clsa", 0)
    assert a.payload == {
        "messages": [{"role": "user", "content": "Label this: the roof leaks"}],
        "params": {"temperature": 0},
    }
    assert a.pipeline == {
        "input": "the roof leaks", "route": "", "provider": "", "params": {"temperature": 0},
        "step": "classify", "steps": [], "stats": [],
    }  # fmt: skip
    assert b.pipeline["provider"] == "suma" and b.pipeline["input"] == "one"
    assert b.route == "classify"  # the step's own target goes before the item's


def test_the_refusals_name_the_step_and_the_field(team, routes):
    typo = {**SUMMARY, "template": "{steps.sumary} {input}"}
    assert refusals(team, [CLASSIFY, typo]) == {
        "steps[1].template": "unknown step 'sumary' (earlier steps: classify)"
    }
    later = {**CLASSIFY, "template": "{steps.summary}"}
    assert refusals(team, [later, SUMMARY]) == {
        "steps[0].template": "step 'summary' runs later (earlier steps: none)"
    }
    got = refusals(
        team,
        [
            {"name": "classify", "route": "clasify", "template": "{inptu}", "params": {"max_tokens": 0}},
            {"name": "classify", "provider": "off", "route_by": {"x": "nowhere"}, "extra": 1},
        ],
    )
    assert "did you mean 'classify'" in got["steps[0].route"]
    assert got["steps[0].template"].startswith("unknown placeholder {inptu}")
    assert got["steps[0].params.max_tokens"] == "must be a positive integer"
    assert got["steps[1].name"] == "duplicate step name 'classify'"
    assert got["steps[1].provider"] == "provider 'off' is disabled"
    assert got["steps[1].route_by.x"].startswith("unknown route 'nowhere'")
    assert got["steps[1].extra"].startswith("unknown field")
    assert refusals(team, [{**CLASSIFY, "route_by": {"*": "sum_a"}}]) == {
        "steps[0].route_by": "the first step has no previous answer to route by"
    }
    twice = {**SUMMARY, "route_by": {"Urgent": "sum_a", " urgent ": "sum_b"}}
    assert refusals(team, [CLASSIFY, twice]) == {
        "steps[1].route_by. urgent ": "the same answer as 'Urgent' once trimmed and case-folded"
    }
    assert refusals(team, [{"name": "a b", "route": "classify"}])["steps[0].name"].startswith("must be")
    assert refusals(team, [])["steps"] == "0 steps; give 1 to 10"
    assert refusals(team, {"name": "x"})["steps"] == "must be a list of steps, got an object"


def test_items_need_a_target_where_a_step_has_none(team, routes):
    free = {"name": "free", "template": "{input}"}
    assert refusals(team, [CLASSIFY, free]) == {
        "0.route": "one of 'route' or 'provider' is required: step 'free' has none of its own"
    }
    no_input = [{"custom_id": "s", "messages": [{"role": "system", "content": "be brief"}]}]
    assert refusals(team, [CLASSIFY], no_input) == {
        "0.messages": "a batch with steps reads the item's last user message as {input}: it has none (or no text)"
    }
    # with a target of its own the item is fine; without steps it is the usual item error
    assert submit(team, [CLASSIFY, free], [{"custom_id": "a", "route": "sum_a", "query": "q"}])
    with pytest.raises(SubmissionError) as caught:
        submit(team, None, [{"custom_id": "z", "query": "q"}])
    assert caught.value.errors[0].field == "route"


def test_params_a_step_provider_refuses_name_the_step(team, routes, make_provider, make_route):
    tiny = make_provider("tiny", tpm=1200)  # its TPM bucket holds 100 tokens: a request over that never goes
    make_route("sum_tiny", tiny)
    big = {**SUMMARY, "route_by": {"*": "sum_tiny"}, "params": {"max_tokens": 500}}
    got = refusals(team, [CLASSIFY, big])
    assert (
        list(got) == ["steps[1].params.max_tokens"] and "provider tiny" in got["steps[1].params.max_tokens"]
    )
    # the item's params go with every step (under the step's own): the step without max_tokens refuses it
    steps = [{"name": "classify", "route": "sum_tiny"}, SUMMARY]
    got = refusals(team, steps, [{"custom_id": "a", "query": "q", "params": {"max_tokens": 500}}])
    assert list(got) == ["0.params.max_tokens"]
    assert got["0.params.max_tokens"].startswith("step 'classify': quota_impossible: provider tiny")


def test_the_rest_api_takes_steps_and_shows_them(team, routes, api_key):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key[1]}")
    body = {"items": [{"custom_id": "a", "query": "q"}], "steps": [CLASSIFY, SUMMARY]}
    created = client.generic("POST", "/api/v1/batches", json.dumps(body), content_type="application/json")
    assert created.status_code == 201, created.content
    assert [s["name"] for s in created.json()["steps"]] == ["classify", "summary"]
    bad = {**body, "steps": [CLASSIFY, {**SUMMARY, "template": "{steps.sumary}"}]}
    refused = client.generic("POST", "/api/v1/batches", json.dumps(bad), content_type="application/json")
    assert refused.status_code == 400
    assert refused.json()["errors"][0]["field"] == "steps[1].template"
    jsonl = client.generic(
        "POST",
        "/api/v1/batches?steps=" + json.dumps([CLASSIFY]),
        '{"custom_id": "j", "query": "q"}\n',
        content_type="application/jsonl",
    )
    assert jsonl.status_code == 201, jsonl.content
    assert jsonl.json()["steps"][0]["name"] == "classify"
    broken = client.generic(
        "POST",
        "/api/v1/batches?steps=[{",
        '{"custom_id": "j", "query": "q"}\n',
        content_type="application/jsonl",
    )
    assert broken.status_code == 400 and broken.json()["errors"][0]["field"] == "steps"
    plain = client.generic(
        "POST", "/api/v1/batches", json.dumps({"items": [{"custom_id": "p", "route": "sum_a", "query": "q"}]}),
        content_type="application/json",
    )  # fmt: skip
    assert plain.json()["steps"] == []


def test_the_budget_check_counts_every_step(team, routes, settings, redis_sync):
    targets = known_targets()
    steps = check_steps([CLASSIFY, SUMMARY], targets)
    valid = submission.validate_items([{"custom_id": "a", "query": "q" * 400}], targets=targets, steps=steps)
    one = estimate_payload_tokens(v.payload for v in valid)
    every = estimate_payload_tokens(step_payloads(valid, steps))
    # the classify step's estimate plus the summary's: its template over the input, its own max_tokens
    summary = {
        "messages": [{"role": "user", "content": "Summarise (): " + "q" * 400}],
        "params": {"max_tokens": 50},
    }
    assert every == one + estimate_payload_tokens([summary])
    assert one > settings.GATEWAY_DEFAULT_MAX_TOKENS > estimate_payload_tokens([summary]) > 100
    # a budget the first step alone would fit in refuses the pipeline (429, nothing stored)
    Team.objects.filter(id=team.id).update(daily_token_budget=one + 10)
    with pytest.raises(submission.BudgetRefused):
        submit(Team.objects.get(id=team.id), [CLASSIFY, SUMMARY], [{"custom_id": "a", "query": "q" * 400}])
    assert not Batch.objects.exists()
    assert submit(Team.objects.get(id=team.id), [CLASSIFY], [{"custom_id": "a", "query": "q" * 400}])


def test_the_submit_batch_command_takes_a_steps_file(team, routes, tmp_path):
    items = tmp_path / "docs.jsonl"
    items.write_text('{"custom_id": "a", "query": "q"}\n')
    steps = tmp_path / "steps.json"
    steps.write_text(json.dumps([CLASSIFY, SUMMARY]))
    out, err = io.StringIO(), io.StringIO()
    call_command(
        "submit_batch", str(items), "--team", team.name, "--steps", str(steps), stdout=out, stderr=err
    )
    assert [s["name"] for s in json.loads(out.getvalue())["steps"]] == ["classify", "summary"]
    steps.write_text(json.dumps([{**CLASSIFY, "route": "clasify"}]))
    with pytest.raises(CommandError, match="nothing was stored"):
        call_command(
            "submit_batch", str(items), "--team", team.name, "--steps", str(steps), stdout=out, stderr=err
        )
    assert "body: steps[0].route: unknown route 'clasify'" in err.getvalue()
    steps.write_text("[{")
    with pytest.raises(CommandError, match="--steps: .* is not valid JSON"):
        call_command("submit_batch", str(items), "--team", team.name, "--steps", str(steps))
    assert Batch.objects.count() == 1
