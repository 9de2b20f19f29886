"""An evaluation's comparison (docs/contract.md §4 "targets"; GET /api/v1/batches/{id}/comparison and the
dashboard's comparison page): per target its copies' outcomes, latency, tokens and cost, the agreement
between each pair of targets, and the side-by-side rows of the CSV export. A selector: reads only.

Figures per target (over its copies, one per item):
* ``items`` copies; ``ok`` succeeded; ``failed`` ended without an answer (failed, cancelled, expired);
  ``pending`` not finished yet (pending, running);
* ``request_count``: HTTP attempts sent (retries included: the copies' ``attempts``);
* ``p50_latency_ms`` / ``p95_latency_ms``: nearest-rank percentiles of the ok copies' latency (null
  when none is ok);
* ``prompt_tokens`` / ``completion_tokens`` / ``total_tokens`` of the answers, ``retry_extra_tokens``;
* ``cost`` (``wasted_cost`` of it) priced by providers.pricing as the batch stats are (null: a price
  is unknown).

Agreement of a pair (a, b): over the items ok on both (``compared``), the share whose answers are equal
once normalised (batches.evaluation.normalised: trimmed, case-folded, whitespace collapsed, trailing
punctuation stripped); ``rate`` is null when nothing was compared. Meant for short answers (labels,
numbers, yes/no): long free text rarely matches exactly.
"""

from __future__ import annotations

import csv
import io
import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from providers.pricing import UNKNOWN, Prices, prices_by_provider, sum_usage_costs

from .evaluation import normalised, own_id
from .models import Batch, BatchItem, ItemStatus
from .steps import answer_text

COLUMNS = (
    "custom_id",
    "target",
    "status",
    "provider",
    "attempts",
    "latency_ms",
    "response",
    "prompt_tokens",
    "completion_tokens",
    "cached_tokens",
    "cache_write_tokens",
    "retry_extra_tokens",
    "served_by",
)
ENDED_WITHOUT_ANSWER = (ItemStatus.FAILED, ItemStatus.CANCELLED, ItemStatus.EXPIRED)
# per target in the CSV, after custom_id
CSV_FIELDS = ("ok", "answer", "latency_ms", "prompt_tokens", "completion_tokens")


@dataclass
class Copy:
    """One copy's figures (one row of COLUMNS)."""

    custom_id: str
    target: str
    status: str
    provider: str
    attempts: int
    latency_ms: int | None
    answer: str
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    cache_write_tokens: int
    retry_extra_tokens: int
    served_by: str

    @property
    def ok(self) -> bool:
        return self.status == ItemStatus.SUCCEEDED


def copies(batch: Batch) -> Iterator[Copy]:
    """The batch's copies in submission order (each item's targets side by side), read with a cursor."""
    rows = BatchItem.objects.filter(batch=batch).order_by("seq").values_list(*COLUMNS)
    for (
        cid,
        target,
        status,
        provider,
        attempts,
        latency,
        response,
        *tokens,
        extra,
        served_by,
    ) in rows.iterator(chunk_size=2000):
        p, c, cached, written = (int(t or 0) for t in tokens)
        yield Copy(
            own_id(cid, target), target, status, provider, int(attempts), latency,
            answer_text(response) if status == ItemStatus.SUCCEEDED else "",
            p, c, cached, written, int(extra or 0), served_by,
        )  # fmt: skip


def nearest_rank(values: list[int], q: float) -> int | None:
    """The nearest-rank ``q`` percentile (None for no values)."""
    if not values:
        return None
    ordered = sorted(values)
    return int(ordered[max(0, math.ceil(q * len(ordered)) - 1)])


@dataclass
class _Target:
    items: int = 0
    ok: int = 0
    failed: int = 0
    request_count: int = 0
    latencies: list[int] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    retry_extra_tokens: int = 0
    usage: list[tuple] = field(default_factory=list)  # sum_usage_costs parts, one per copy

    def add(self, c: Copy, prices: Prices) -> None:
        self.items += 1
        self.ok += c.ok
        self.failed += c.status in ENDED_WITHOUT_ANSWER
        self.request_count += c.attempts
        if c.ok and c.latency_ms is not None:
            self.latencies.append(c.latency_ms)
        self.prompt_tokens += c.prompt_tokens
        self.completion_tokens += c.completion_tokens
        self.retry_extra_tokens += c.retry_extra_tokens
        batched = (c.prompt_tokens, c.completion_tokens) if c.served_by == "provider_batch" else (0, 0)
        parts = (
            c.prompt_tokens,
            c.completion_tokens,
            c.retry_extra_tokens,
            c.cached_tokens,
            c.cache_write_tokens,
        )
        self.usage.append((prices, *parts, *batched))

    def as_dict(self) -> dict[str, Any]:
        costs = sum_usage_costs(self.usage)
        return {
            "items": self.items,
            "ok": self.ok,
            "failed": self.failed,
            "pending": self.items - self.ok - self.failed,
            "request_count": self.request_count,
            "p50_latency_ms": nearest_rank(self.latencies, 0.50),
            "p95_latency_ms": nearest_rank(self.latencies, 0.95),
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
            "retry_extra_tokens": self.retry_extra_tokens,
            "cost": costs["cost"],
            "wasted_cost": costs["wasted_cost"],
        }


def comparison(batch: Batch) -> dict[str, Any]:
    """The comparison of an evaluation batch (``batch.targets`` not empty: see ``is_evaluation``)."""
    targets = list(batch.targets)
    prices = prices_by_provider()
    per_target = {name: _Target() for name in targets}
    answers: dict[str, dict[str, str]] = {name: {} for name in targets}  # target → custom_id → normalised
    for c in copies(batch):
        per_target[c.target].add(c, prices.get(c.provider, UNKNOWN))
        if c.ok:
            answers[c.target][c.custom_id] = normalised(c.answer)
    return {
        "batch_id": str(batch.id),
        "status": batch.status,
        "targets": targets,
        "items": max((t.items for t in per_target.values()), default=0),
        "per_target": {name: t.as_dict() for name, t in per_target.items()},
        "agreement": [
            _agreement(a, b, answers[a], answers[b]) for a, b in itertools.combinations(targets, 2)
        ],
    }


def _agreement(a: str, b: str, of_a: dict[str, str], of_b: dict[str, str]) -> dict[str, Any]:
    both = of_a.keys() & of_b.keys()
    agreed = sum(of_a[cid] == of_b[cid] for cid in both)
    return {
        "targets": [a, b],
        "compared": len(both),
        "agreed": agreed,
        "rate": round(agreed / len(both), 6) if both else None,
    }


def is_evaluation(batch: Batch) -> bool:
    return bool(batch.targets)


def csv_header(batch: Batch) -> list[str]:
    return ["custom_id", *(f"{t}.{f}" for t in batch.targets for f in CSV_FIELDS)]


def csv_rows(batch: Batch, *, answers: bool = True) -> Iterator[list[Any]]:
    """One row per item: its custom_id, then per target (in ``batch.targets`` order) ok ("true",
    "false", "" while pending), answer text (blank without ``answers``), latency (ok copies) and tokens."""
    position = {t: i for i, t in enumerate(batch.targets)}
    for custom_id, group in itertools.groupby(copies(batch), key=lambda c: c.custom_id):
        row: list[Any] = [custom_id] + [""] * (len(CSV_FIELDS) * len(position))
        for c in group:
            at = 1 + position[c.target] * len(CSV_FIELDS)
            answer = c.answer if answers else ""
            row[at : at + len(CSV_FIELDS)] = [
                _ok_cell(c), answer, c.latency_ms if c.ok else "", c.prompt_tokens, c.completion_tokens
            ]  # fmt: skip
        yield row


def _ok_cell(c: Copy) -> str:
    """ "true", "false" (ended without an answer) or "" (not finished yet)."""
    if c.ok:
        return "true"
    return "false" if c.status in ENDED_WITHOUT_ANSWER else ""


def csv_lines(batch: Batch, *, answers: bool = True) -> Iterator[str]:
    """The comparison's CSV (``csv_header`` then ``csv_rows``), a line at a time for streaming."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    for row in itertools.chain([csv_header(batch)], csv_rows(batch, answers=answers)):
        writer.writerow(row)
        yield buffer.getvalue()
        buffer.seek(0)
        buffer.truncate()
