"""Shared builders of the provider-batch tests: a fast simulator config, providers with batch APIs,
and a driver that works the due queue in this process until a batch ends."""

from __future__ import annotations

from batches.models import Batch
from batches.submission.options import batch_options
from batches.submission.service import submit_batch
from provider_batches.due import work_slice
from tests.waiting import wait_until

KEY = "sk-test"
DEPLOYMENT = "gpt-4o-batch"
# time_scale 1000: a simulated 24 h window is 86 s real; 300,000 simulated ms = 0.3 s real
TIME_SCALE = 1000


def sim_provider(kind: str = "openai", turnaround_ms: float = 300_000, **extra) -> dict:
    out = {
        "kind": kind,
        "api_key": KEY,
        "batch_turnaround_ms": turnaround_ms,
        "rpm": 100_000,
        "tpm": 100_000_000,
    }
    if kind == "azure_openai":
        out["deployment"] = DEPLOYMENT
    out.update(extra)
    return out


def sim_config(**providers: dict) -> dict:
    return {"time_scale": TIME_SCALE, "seed": 3, "providers": providers}


def batch_provider(make_provider, sim, name: str, kind: str = "openai", **fields):
    values = dict(
        base_url=sim.kind_url(name, kind),
        kind=kind,
        api_key=KEY,
        batch_api=True,
        rpm=6000,
        tpm=10_000_000,
        max_concurrency=20,
        price_prompt_per_million=1,
        price_completion_per_million=2,
    )
    if kind == "azure_openai":
        values.update(
            api_version="2024-10-21", deployment="gpt-4o", batch_deployment=DEPLOYMENT, burst_seconds=1.0
        )
    values.update(fields)
    return make_provider(name, **values)


def items(n: int, provider: str, text: str = "", **params) -> list[dict]:
    return [
        {"custom_id": f"c{i}", "provider": provider, "query": f"question {i} {text}", "params": params}
        for i in range(n)
    ]


def submit(team, batch_items: list[dict], window: str | None = "24h", mode: str | None = None) -> Batch:
    return submit_batch(
        team=team, items=batch_items, options=batch_options(None, window, provider_batch=mode)
    )


def drive_until_done(batch: Batch, timeout: float = 60.0) -> Batch:
    """Work the provider-batch due queue here until the batch has ended (no Celery)."""

    def done() -> bool:
        work_slice()
        batch.refresh_from_db()
        return batch.completed_at is not None

    wait_until(done, timeout=timeout, interval=0.05, what=f"batch {batch.id} to end")
    return batch
