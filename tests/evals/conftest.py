"""Fixtures of the evaluation tests: three targets on the simulator — two providers (evala, evalb) and a
route (same_a) to evala, so evala and same_a give the same answers and evalb another."""

from __future__ import annotations

from decimal import Decimal

import pytest

from sim.testing import sim_server  # noqa: F401 - fixture re-export
from tests.scheduling.conftest import wait_for  # noqa: F401 - fixture re-export

TARGETS = ["evala", "evalb", "same_a"]
PRICES = {"evala": (Decimal("1.00"), Decimal("2.00")), "evalb": (Decimal("3.00"), Decimal("4.00"))}


def sim_config(median_ms: float = 5, **extra) -> dict:
    providers = {name: {"median_ms": median_ms, "sigma": 0.5, "completion_tokens": 1} for name in PRICES}
    for name, overrides in extra.items():
        providers[name] = {**providers[name], **overrides}
    return {"seed": 11, "providers": providers}


@pytest.fixture
def eval_targets(make_provider, make_route):
    """The providers (on port 9 unless ``base_urls`` gives the simulator's) and the route same_a."""

    def make(base_urls=None, **options):
        made = {}
        for name, (prompt, completion) in PRICES.items():
            extra = {"base_url": base_urls(name)} if base_urls else {}
            made[name] = make_provider(
                name,
                price_prompt_per_million=prompt,
                price_completion_per_million=completion,
                **{"rpm": 60000, "tpm": 10**8, "burst_seconds": 1, "max_concurrency": 20, **options, **extra},
            )
        make_provider("evaloff", enabled=False)
        make_route("same_a", made["evala"])
        return made

    return make


def questions(n: int) -> list[dict]:
    return [
        {"custom_id": f"q{i:03d}", "query": f"question {i}?", "params": {"max_tokens": 4}} for i in range(n)
    ]
