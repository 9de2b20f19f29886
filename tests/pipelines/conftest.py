"""Fixtures and helpers of the pipeline tests: the simulator, real workers (tests/scheduling), and a
two-step pipeline (classify → summarise, the summary route chosen by the label)."""

from __future__ import annotations

from collections import Counter, defaultdict

from sim.testing import sim_server  # noqa: F401 - fixture re-export
from tests.scheduling.conftest import wait_for, workers  # noqa: F401 - fixture re-export

# Two classifiers split the classify route 1:1; the simulator answers "[<provider>] tok" (one completion
# token), which is each document's label: clsa's documents are summarised by suma, the others by sumb.
CLASSIFIERS = ("clsa", "clsb")
SUMMARISERS = ("suma", "sumb")
LABEL_A = "[CLSA] tok "  # route_by keys are trimmed and case-folded like the answers
STEPS = [
    {"name": "classify", "route": "classify", "template": "cls:{input}", "params": {"max_tokens": 1}},
    {
        "name": "summary",
        "template": "sum:{input} label={steps.classify}",
        "params": {"max_tokens": 4},
        "route_by": {LABEL_A: "sum_a", "*": "sum_b"},
    },
]
TRACE_TAG = "^(\\w+:d\\d+(?: label=\\[\\w+\\])?)"  # "cls:d0001", "sum:d0001 label=[clsa]"


def sim_config(median_ms: float = 20, **extra) -> dict:
    providers = {
        name: {"median_ms": median_ms, "completion_tokens": 1 if name in CLASSIFIERS else 4}
        for name in (*CLASSIFIERS, *SUMMARISERS)
    }
    for name, overrides in extra.items():
        providers[name] = {**providers.get(name, {}), **overrides}
    return {"seed": 7, "trace_tag_regex": TRACE_TAG, "providers": providers}


def make_pipeline_providers(sim, make_provider, make_route, rpm: int = 6000, **per_provider) -> None:
    """The four providers on the simulator and the routes classify (clsa/clsb 1:1), sum_a, sum_b."""
    made = {}
    for name in (*CLASSIFIERS, *SUMMARISERS):
        options = {"rpm": rpm, "burst_seconds": 1, "max_concurrency": 20, "max_retries": 3}
        options.update(per_provider.get(name, {}))
        made[name] = make_provider(name, base_url=sim.provider_url(name), **options)
    make_route("classify", made["clsa"])
    make_route("classify", made["clsb"])
    make_route("sum_a", made["suma"])
    make_route("sum_b", made["sumb"])


def docs(n: int) -> list[dict]:
    """n documents; no route of their own (every step names its own)."""
    return [{"custom_id": f"d{i:04d}", "query": f"d{i:04d}"} for i in range(n)]


def seen_once(sim, results: list[dict]) -> dict[str, Counter]:
    """Every request the simulator saw, per provider and custom id, against each step's record: one
    request per step run (no retries here), on the provider the step names. Returns the counts."""
    seen = sim.request_counts()
    expected: dict[str, Counter] = defaultdict(Counter)
    for result in results:
        for step in result["steps"]:
            if step["attempts"]:
                expected[step["provider"]][result["custom_id"]] += step["attempts"]
    got = {p: Counter(ids) for p, ids in seen.items() if ids}
    assert got == dict(expected)
    return got


def queue_batch_steps(team, items, steps):
    """Store a pipeline batch through the submission service without starting it (its on_commit
    enqueue is swallowed: the test starts it on its workers' queue)."""
    from batches import submission

    saved = submission.enqueue.enqueue_start
    submission.enqueue.enqueue_start = lambda batch_id: None
    try:
        return submission.submit_batch(team=team, items=items, steps=steps)
    finally:
        submission.enqueue.enqueue_start = saved
