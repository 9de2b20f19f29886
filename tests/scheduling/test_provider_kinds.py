"""Every provider kind (gateway_engine/kinds.py KINDS: openai, anthropic, gemini, azure_openai, bedrock)
in the deployment users run (issues #21, #37): real PostgreSQL and Redis, two
`celery -A gateway_site worker` processes on Celery's default prefork pool, and the simulator serving
each kind with its real API's request validation (sim/, docs/sim.md).

* one batch routed across every kind: every custom_id once, each kind's
  simulator accepted every request as valid for its own API (0 shape rejections), every RESULT
  ``response`` has the same OpenAI ``chat.completion`` shape;
* one batch whose routes each meet one failure form, all with an OpenAI fallback: an Anthropic 529
  burst (``overloaded``: retried, breaker, fallback, never a bucket pause, never a 429), a Gemini
  per-day quota, and the four billing-exhaustion forms (OpenAI ``insufficient_quota``, Anthropic 429
  spend limit, 400 "usage limits", 402 ``billing_error``): the provider is paused for every worker, no
  item is retried there, nothing reaches it once the pause is set beyond what was already in flight,
  everything falls back; an output-heavy Anthropic route under ITPM/OTPM: 0 × 429 with ``tpm`` high.
"""

from __future__ import annotations

from collections import Counter

import pytest

from batches.models import Batch, BatchItem, BatchStatus
from gateway_engine.kinds import KINDS as ENGINE_KINDS
from providers.adapters import provider_limits
from providers.limits.factory import provider_pauses_sync, snapshot_all_sync
from providers.models import Provider
from tests.exactly_once import assert_exactly_once
from tests.workers import manage

from .conftest import queue_batch, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

# one provider per kind the gateway speaks (gateway_engine/kinds.py), named after it; what a kind needs
# beside the common fields, on both sides (the simulator's config, the gateway's provider)
KINDS = {kind: kind for kind in sorted(ENGINE_KINDS)}
BEDROCK = {"region": "us-east-1", "aws_access_key_id": "AKIASIMULATOR", "api_key": "bedrock/secret"}
SIM_FIELDS = {"bedrock": BEDROCK}
GATEWAY_FIELDS = {"azure_openai": {"api_version": "2024-10-21"}, "bedrock": BEDROCK}
FAST = {"median_ms": 30, "sigma": 0.2, "rpm": 100_000, "tpm": 100_000_000}
TAG = r"^(\w+):"  # the trace tag: the route name in front of each query


def item(cid: str, route: str, text: str = "", max_tokens: int = 16) -> dict:
    return {
        "custom_id": cid,
        "route": route,
        "messages": [
            {"role": "system", "content": "Answer in one word."},
            {"role": "user", "content": f"{route}:{cid} {text}".strip()},
        ],
        "params": {"max_tokens": max_tokens, "temperature": 0.5},
    }


def openai_shaped(response) -> bool:
    if not isinstance(response, dict) or response.get("object") != "chat.completion":
        return False
    choice = (response.get("choices") or [{}])[0]
    usage = response.get("usage") or {}
    return (
        isinstance((choice.get("message") or {}).get("content"), str)
        and isinstance(choice.get("finish_reason"), str)
        and all(isinstance(usage.get(k), int) for k in ("prompt_tokens", "completion_tokens", "total_tokens"))
    )


def gateway_provider(make_provider, sim, name: str, kind: str, **overrides):
    values = dict(
        base_url=sim.kind_url(name, kind),
        model=f"{name}-model",
        kind=kind,
        rpm=60_000,
        tpm=50_000_000,
        max_concurrency=8,
        burst_seconds=1,
        max_retries=3,
    )
    values.update(GATEWAY_FIELDS.get(kind, {}))
    values.update(overrides)
    return make_provider(name, **values)


def run(workers, team, items, timeout: float = 150) -> Batch:
    w = workers()
    w.start("w1")
    w.start("w2")
    batch = queue_batch(team, items)
    w.start_batch(batch.id)
    wait_for(
        lambda: Batch.objects.filter(id=batch.id, completed_at__isnull=False).exists(),
        timeout,
        "the batch to finish",
        w.logs,
    )
    w.stop()
    batch.refresh_from_db()
    return batch


@pytest.mark.timeout(240)
def test_one_batch_across_every_kind(sim_server, make_provider, make_route, team, workers):
    providers = {
        n: {"kind": k, "model": f"{n}-model", **FAST, **SIM_FIELDS.get(k, {})} for n, k in KINDS.items()
    }
    sim = sim_server({"seed": 3, "providers": providers})
    for name, kind in KINDS.items():
        make_route("mix", gateway_provider(make_provider, sim, name, kind))
    items = [item(f"m{i:03d}", "mix") for i in range(400)]
    batch = run(workers, team, items)

    assert batch.status == BatchStatus.COMPLETED and batch.stats["success_count"] == 400, batch.stats
    summary = assert_exactly_once([batch.id], [sim])
    assert summary["requests"] == 400 and summary["duplicates"] == 0, summary
    assert sim.shape_rejections() == dict.fromkeys(KINDS, 0)
    served = Counter(BatchItem.objects.filter(batch=batch).values_list("provider", flat=True))
    assert set(served) == set(KINDS) and min(served.values()) > 400 // len(KINDS) // 2, served
    rows = list(BatchItem.objects.filter(batch=batch).values_list("provider", "response", "native_response"))
    assert all(openai_shaped(response) for _, response, _ in rows)
    natives = {p: native for p, _, native in rows}
    assert (
        natives["openai"] is None and natives["anthropic"]["type"] == "message"
    )  # the native answer is kept
    assert "candidates" in natives["gemini"] and natives["azure_openai"] is None
    assert natives["bedrock"]["stopReason"] in ("end_turn", "max_tokens") and "output" in natives["bedrock"]


# ---- failure semantics, one route per form, one batch ------------------------------------------------

FAULT_ROUTES = {
    # route: (provider, sim config of that provider)
    "over": ("an1", {"kind": "anthropic", "overload": {"period_s": 1000, "duration_s": 1000}}),
    "day": ("ge1", {"kind": "gemini", "rpd": 6, "day_seconds": 86_400}),
    "bill-oa": ("oa1", {"kind": "openai", "spend_exhausted_after": 4}),
    "bill-429": ("an2", {"kind": "anthropic", "spend_exhausted_after": 4, "spend_form": "429"}),
    "bill-400": ("an3", {"kind": "anthropic", "spend_exhausted_after": 4, "spend_form": "400"}),
    "bill-402": ("an4", {"kind": "anthropic", "spend_exhausted_after": 4, "spend_form": "402"}),
}
PAUSED = {"ge1": "per_day_quota", "oa1": "billing", "an2": "billing", "an3": "billing", "an4": "billing"}
PER_ROUTE = 30
CONCURRENCY = 4  # each faulty provider's gateway-side concurrency: at most this many were in flight


def arrivals_after_first(trace: list[dict], provider: str, status: int) -> tuple[int, int]:
    """(requests that reached ``provider`` after it sent its first ``status`` answer, its requests)."""
    rows = [r for r in trace if r["provider"] == provider]
    firsts = [r["done_s"] for r in rows if r["status"] == status and r["done_s"] is not None]
    assert firsts, f"{provider} never answered {status}: {rows[:5]}"
    first_done = min(firsts)
    return sum(1 for r in rows if r["arrival_s"] > first_done), len(rows)


@pytest.mark.timeout(300)
def test_failure_forms_fall_back_and_pause_the_provider(sim_server, make_provider, make_route, team, workers):
    providers = {"fb": {"kind": "openai", **FAST, "model": "fb-model"}}
    for name, cfg in FAULT_ROUTES.values():
        providers[name] = {**FAST, "model": f"{name}-model", "max_concurrency": 50, **cfg}
    providers["an5"] = {  # output-heavy under ITPM/OTPM: 1,000 output tokens a real second
        "kind": "anthropic", "model": "an5-model", "median_ms": 30, "rpm": 100_000, "tpm": 100_000_000,
        "itpm": 600_000, "otpm": 6_000, "burst_seconds": 13,
    }  # fmt: skip
    sim = sim_server({"seed": 5, "time_scale": 10, "trace_tag_regex": TAG, "providers": providers})
    fallback = gateway_provider(make_provider, sim, "fb", "openai", max_concurrency=20)
    for route, (name, cfg) in FAULT_ROUTES.items():
        first = gateway_provider(make_provider, sim, name, cfg["kind"], max_concurrency=CONCURRENCY)
        make_route(route, first, priority=0)
        make_route(route, fallback, priority=1)
    heavy = gateway_provider(make_provider, sim, "an5", "anthropic", itpm=6_000_000, otpm=60_000)
    make_route("heavy", heavy)
    items = [item(f"{r}-{i:02d}", r) for r in FAULT_ROUTES for i in range(PER_ROUTE)]
    items += [item(f"heavy-{i:02d}", "heavy", max_tokens=100) for i in range(60)]
    batch = run(workers, team, items, timeout=200)

    assert batch.status == BatchStatus.COMPLETED, batch.stats
    assert batch.stats["success_count"] == len(items), batch.stats  # 0 lost: everything fell back
    assert_exactly_once([batch.id], [sim])
    assert sim.shape_rejections() == dict.fromkeys(providers, 0)
    counts = sim.request_counts()
    trace = sim.trace()
    stats = batch.stats["providers"]

    # overloaded: retried and counted as overloaded, never a 429, the bucket never paused
    an1 = stats["an1"]
    assert an1["errors_by_class"]["overloaded"] == an1["request_count"] > 0, an1
    assert an1["errors_by_class"]["429"] == 0 and an1["rate_limited_count"] == 0, an1
    (state,) = snapshot_all_sync([provider_limits(Provider.objects.get(name="an1"))])
    assert state.paused_until_ms == 0  # no Retry-After pause: overload is not quota
    assert max(counts["an1"].values()) <= 4  # 1 + max_retries at most, then the fallback

    # pauses: no retry there, nothing after the first pausing answer beyond what was in flight
    pauses = provider_pauses_sync(list(PAUSED))
    assert {name: p.reason for name, p in pauses.items()} == PAUSED
    status_of = {"ge1": 429, "oa1": 429, "an2": 429, "an3": 400, "an4": 402}
    for name, status in status_of.items():
        assert max(counts[name].values()) == 1, (name, counts[name])  # never retried there
        late, total = arrivals_after_first(trace, name, status)
        assert late <= CONCURRENCY, (name, late, total)  # at most one each for those already in flight
        assert total <= 6 + CONCURRENCY + 1, (name, total)
    kinds = Counter(
        e["error_type"]
        for log in BatchItem.objects.filter(batch=batch).values_list("attempt_log", flat=True)
        for e in log
        if e["provider"] in ("oa1", "an2", "an3", "an4")
    )
    # four answered before the account ran dry, every later answer there was the billing form
    assert kinds[""] == 4 * 4 and set(kinds) == {"", "provider_quota_exhausted"}, kinds

    # ITPM/OTPM: the output-heavy route stayed under the provider's OTPM: not one 429
    an5 = sim.provider_counters("an5")
    assert an5["rate_limited_429"] == 0 and an5["requests"] == 60, an5

    # the operator clears a pause; the provider takes traffic again
    out = manage("clear_provider_pause", "oa1")
    assert "oa1" in out
    assert "oa1" not in provider_pauses_sync(["oa1"])
