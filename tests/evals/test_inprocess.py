"""An evaluation through the real dispatcher in this process, real PostgreSQL and Redis, and the
simulator: 300 questions × 3 targets. What each provider saw, the RESULTs' targets, and the comparison's
every figure (JSON and CSV) checked against the items."""

from __future__ import annotations

import csv
import io
import itertools
import math
from collections import Counter
from decimal import Decimal

import pytest
from django.contrib.auth.models import Permission, User
from django.urls import reverse
from rest_framework.test import APIClient

from batches import submission
from batches.execution import keepalive
from batches.models import Batch, BatchStatus
from batches.selectors import iter_results

from .conftest import PRICES, TARGETS, questions, sim_config, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
N = 300
FAILING = 30  # evalb answers its first 30 requests with a 400 (client_error: not retried)


def run(team, items, targets) -> Batch:
    batch = submission.submit_batch(team=team, items=items, targets=targets)  # starts the local dispatcher
    keepalive.ensure_local_dispatcher(background=True)
    try:
        wait_for(
            lambda: Batch.objects.filter(id=batch.id, completed_at__isnull=False).exists(), 60, "the batch"
        )
    finally:
        wait_for(lambda: not keepalive._local_state["running"], 60, "the dispatcher thread to end")
    return Batch.objects.get(id=batch.id)


def rank(values: list[int], q: float) -> int | None:
    ordered = sorted(values)
    return ordered[math.ceil(q * len(ordered)) - 1] if ordered else None


def answer(result: dict) -> str:
    return result["response"]["choices"][0]["message"]["content"]


def test_300_questions_on_three_targets(sim_server, eval_targets, team, api_key, redis_sync):
    sim = sim_server(sim_config(evalb={"status_script": [400] * FAILING}))
    eval_targets(base_urls=sim.provider_url)
    batch = run(team, questions(N), TARGETS)
    assert batch.total_count == 3 * N and batch.completed_count == 3 * N - FAILING
    assert batch.failed_count == FAILING and batch.status == BatchStatus.COMPLETED
    results = list(iter_results(batch))
    # 900 provider calls: every question once at each target (same_a is a route to evala)
    seen = sim.request_counts()
    ids = [q["custom_id"] for q in questions(N)]
    assert seen["evala"] == {f"{i}@{t}": 1 for i in ids for t in ("evala", "same_a")}
    assert seen["evalb"] == {f"{i}@evalb": 1 for i in ids}
    assert sum(map(len, seen.values())) == 3 * N
    # one RESULT per item and target, side by side, with the item's own custom_id
    assert [(r["custom_id"], r["target"]) for r in results] == [(i, t) for i in ids for t in TARGETS]
    assert {r["provider"] for r in results if r["target"] == "same_a"} == {"evala"}
    by_target = {t: [r for r in results if r["target"] == t] for t in TARGETS}
    assert sum(not r["ok"] for r in by_target["evalb"]) == FAILING
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key[1]}")
    got = client.get(f"/api/v1/batches/{batch.id}/comparison")
    assert got.status_code == 200, got.content
    body = got.json()
    assert body["targets"] == TARGETS and body["items"] == N and body["status"] == "completed"
    for t in TARGETS:
        rs = by_target[t]
        ok = [r for r in rs if r["ok"]]
        prompt = sum(r["usage"]["prompt_tokens"] for r in ok)
        completion = sum(r["usage"]["completion_tokens"] for r in ok)
        p_price, c_price = PRICES["evala" if t == "same_a" else t]
        cost = (Decimal(prompt) * p_price + Decimal(completion) * c_price) / Decimal(1_000_000)
        assert body["per_target"][t] == {
            "items": N,
            "ok": len(ok),
            "failed": N - len(ok),
            "pending": 0,
            "request_count": sum(r["attempts"] for r in rs),
            "p50_latency_ms": rank([r["latency_ms"] for r in ok], 0.5),
            "p95_latency_ms": rank([r["latency_ms"] for r in ok], 0.95),
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "retry_extra_tokens": 0,
            "cost": float(cost.quantize(Decimal("0.000001"))),
            "wasted_cost": 0.0,
        }, t
        assert body["per_target"][t]["request_count"] == N  # one attempt each, the 400s included
    assert body["per_target"]["evalb"]["ok"] == N - FAILING and completion > 0
    # agreement: evala and same_a answer alike ("[evala] tok"), evalb never does
    answers = {t: {r["custom_id"]: answer(r) for r in rs if r["ok"]} for t, rs in by_target.items()}
    expected = []
    for a, b in itertools.combinations(TARGETS, 2):
        both = answers[a].keys() & answers[b].keys()
        agreed = sum(answers[a][c].strip().casefold() == answers[b][c].strip().casefold() for c in both)
        expected.append(
            {"targets": [a, b], "compared": len(both), "agreed": agreed, "rate": agreed / len(both)}
        )
    assert body["agreement"] == expected
    assert [(e["compared"], e["rate"]) for e in expected] == [
        (N - FAILING, 0.0),
        (N, 1.0),
        (N - FAILING, 0.0),
    ]
    # the CSV: one row per custom_id, each target's answer, latency and tokens
    export = client.get(f"/api/v1/batches/{batch.id}/comparison?format=csv")
    assert export.status_code == 200 and export["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(b"".join(export.streaming_content).decode())))
    assert [row["custom_id"] for row in rows] == ids
    for row, group in zip(rows, zip(*[iter(results)] * 3, strict=True), strict=True):
        for r in group:
            t = r["target"]
            assert row[f"{t}.ok"] == str(r["ok"]).lower()
            assert row[f"{t}.answer"] == (answer(r) if r["ok"] else "")
            assert row[f"{t}.latency_ms"] == (str(r["latency_ms"]) if r["ok"] else "")
            usage = r["usage"] or {}
            assert row[f"{t}.prompt_tokens"] == str(usage.get("prompt_tokens", 0))
    assert Counter(row["evalb.ok"] for row in rows) == {"true": N - FAILING, "false": FAILING}


def test_the_dashboard_comparison_page_shows_answers_only_with_view_content(
    sim_server, eval_targets, team, redis_sync, client
):
    sim = sim_server(sim_config())
    eval_targets(base_urls=sim.provider_url)
    batch = run(team, questions(6), TARGETS)
    staff = User.objects.create_user("ops", is_staff=True)
    client.force_login(staff)
    detail = client.get(reverse("dashboard:batch_detail", args=[batch.pk])).content.decode()
    assert reverse("dashboard:batch_comparison", args=[batch.pk]) in detail
    page = client.get(reverse("dashboard:batch_comparison", args=[batch.pk]))
    assert page.status_code == 200
    text = page.content.decode()
    assert "<code>evalb</code>" in text and "100.0 %" in text and "0.0 %" in text  # the agreement rates
    assert "q000" not in text and "[evala] tok" not in text  # custom_ids and answers are content
    csv_url = reverse("dashboard:batch_comparison_csv", args=[batch.pk])
    assert csv_url not in text and client.get(csv_url).status_code == 403
    reader = User.objects.create_user("reader", is_staff=True)
    reader.user_permissions.add(Permission.objects.get(codename="view_content"))
    client.force_login(reader)
    text = client.get(reverse("dashboard:batch_comparison", args=[batch.pk])).content.decode()
    assert "<code>q005</code>" in text and "[evala] tok" in text and csv_url in text
    export = client.get(csv_url)
    rows = list(csv.reader(io.StringIO(b"".join(export.streaming_content).decode())))
    assert rows[0][:3] == ["custom_id", "evala.ok", "evala.answer"] and len(rows) == 7
    plain = submission.submit_batch(team=team, items=[{"custom_id": "p", "provider": "evala", "query": "x"}])
    assert client.get(reverse("dashboard:batch_comparison", args=[plain.pk])).status_code == 404
    wait_for(
        lambda: Batch.objects.filter(id=plain.id, completed_at__isnull=False).exists(), 60, "the plain batch"
    )
