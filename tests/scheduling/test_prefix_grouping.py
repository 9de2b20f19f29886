"""Prefix grouping against a provider's prompt cache (issue #25), in the deployment users run: real
PostgreSQL and Redis, `celery -A gateway_site worker` processes on the default prefork pool, the simulator's
OpenAI prompt cache (automatic for prompts of >= 1,024 tokens, an LRU of 4 prefixes: sim/prompt_cache.py).

20 long system prompts (2,000 tokens each) x 50 items, submitted interleaved (item n has prompt n % 20):
* grouping on (the default): the items of one prefix are sent back to back, so the provider's cache still
  holds the prefix when the next one arrives — cached input tokens are >= 90 % of the possible (every item
  after the first of its group reads 1,920 tokens: 1,024 + 7 x 128 of its 2,000-token prefix); every item
  records its cached tokens, the batch's stats count them per provider and in token_usage and price them at
  the cached rate;
* grouping off (``GATEWAY_PREFIX_GROUPING=0``, the same batch): sent in submission order, 20 prefixes
  round-robin through 4 cache entries — recorded beside it in the output (and asserted to be far lower).
"""

from __future__ import annotations

from decimal import Decimal

import pytest

from batches.models import Batch, BatchItem, BatchStatus
from tests.exactly_once import assert_exactly_once

from .conftest import queue_batch, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

GROUPS, PER_GROUP = 20, 50
HIT_TOKENS = 1920  # what one hit reads of a 2,000-token prefix (OpenAI: 1,024 + 128-token increments)
POSSIBLE = (GROUPS * PER_GROUP - GROUPS) * HIT_TOKENS
PRICES = {"price_prompt_per_million": Decimal("2.50"), "price_cached_prompt_per_million": Decimal("1.25"),
          "price_completion_per_million": Decimal("10")}  # fmt: skip


def system_prompt(g: int) -> str:
    head = f"You are reviewer number {g:02d}. "  # distinct from the first character on
    return (head + "Follow the house rules carefully. " * 400)[:8000]  # 8,000 characters = 2,000 tokens


def items() -> list[dict]:
    return [
        {"custom_id": f"c{n:04d}", "provider": "pc",
         "messages": [{"role": "system", "content": system_prompt(n % GROUPS)},
                      {"role": "user", "content": f"#{n:04d}: classify this"}],
         "params": {"max_tokens": 4}}
        for n in range(GROUPS * PER_GROUP)
    ]  # fmt: skip


def run_batch(workers, team, sim, **env) -> tuple[Batch, dict]:
    sim.reset()
    w = workers(**env)
    w.start("w1")
    batch = queue_batch(team, items())
    w.start_batch(batch.id)
    wait_for(lambda: Batch.objects.filter(id=batch.id, completed_at__isnull=False).exists(), 180,
             "the batch to finish", w.logs)  # fmt: skip
    w.stop()
    batch.refresh_from_db()
    assert batch.status == BatchStatus.COMPLETED and batch.stats["success_count"] == GROUPS * PER_GROUP
    summary = assert_exactly_once([batch.id], [sim])
    assert summary["duplicates"] == 0, summary
    return batch, sim.provider_counters("pc")


@pytest.mark.timeout(420)
def test_grouped_prefixes_hit_the_providers_prompt_cache(sim_server, make_provider, team, workers):
    sim = sim_server({"seed": 5, "providers": {"pc": {"model": "pc-model", "median_ms": 10, "rpm": 100_000,
                                                       "tpm": 100_000_000, "prompt_cache_entries": 4}}})  # fmt: skip
    make_provider("pc", base_url=sim.provider_url("pc"), model="pc-model", rpm=60_000, tpm=50_000_000,
                  max_concurrency=2, burst_seconds=1, **PRICES)  # fmt: skip

    grouped, seen = run_batch(workers, team, sim)
    keys = set(BatchItem.objects.filter(batch=grouped).values_list("prefix_key", flat=True))
    assert len(keys) == GROUPS and "" not in keys  # one key per system prompt, stored at submission
    cached = list(BatchItem.objects.filter(batch=grouped).values_list("cached_tokens", flat=True))
    usage, per_provider = grouped.stats["token_usage"], grouped.stats["providers"]["pc"]
    assert sum(c or 0 for c in cached) == usage["cached_tokens"] == per_provider["cached_tokens"]
    assert usage["cached_tokens"] == seen["cached_prompt_tokens"]  # what the provider reported, per item

    interleaved, seen_off = run_batch(workers, team, sim, GATEWAY_PREFIX_GROUPING="0")
    off = interleaved.stats["token_usage"]
    print(
        f"\nprefix grouping, {GROUPS} prompts x {PER_GROUP} items, possible cached {POSSIBLE} tokens:\n"
        f"  grouped:     cached {usage['cached_tokens']} ({usage['cached_tokens'] / POSSIBLE:.1%}), "
        f"hits {seen['prompt_cache_hits']}, cost {usage['cost']}\n"
        f"  interleaved: cached {off['cached_tokens']} ({off['cached_tokens'] / POSSIBLE:.1%}), "
        f"hits {seen_off['prompt_cache_hits']}, cost {off['cost']}"
    )
    assert usage["cached_tokens"] >= 0.9 * POSSIBLE, (usage, seen)
    assert off["cached_tokens"] < 0.5 * usage["cached_tokens"], (off, seen_off)
    assert usage["prompt_tokens"] == off["prompt_tokens"]  # the same work, priced apart:
    saved = Decimal(str(off["cost"])) - Decimal(str(usage["cost"]))
    expected = Decimal(usage["cached_tokens"] - off["cached_tokens"]) * Decimal("1.25") / 1_000_000
    assert abs(saved - expected) < Decimal("0.00001"), (saved, expected)
