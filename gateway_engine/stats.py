"""Per-batch, per-provider statistics shaped as the contract's "stats" object (docs/contract.md §4).

Built from the per-item attempt logs, so the same code summarizes one in-memory run (the plain-Python
batcher) and a whole batch read back from the database after several workers shared it.

Attempt log entry (one per HTTP attempt): {"provider", "status_code", "error_type", "latency_ms",
"prompt_tokens", "completion_tokens", "tokens", "used", "at"} (+ "cached_tokens" when reported, "detail"
for staff); ``used`` marks the attempt whose answer
became the item's result. ``tokens`` billed by attempts that were not used are the retry_extra_tokens.
``errors_by_class`` follows the one table (gateway_engine.retry.ERROR_CLASS_TABLE): an ``overloaded``
attempt is in its own class, never in ``429`` / ``rate_limited_count``; ``provider_quota_exhausted`` is
``quota_exhausted`` whatever its status (an OpenAI 429 insufficient_quota is billing, not rate).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from .error_kinds import CLASS_429
from .retry import ERROR_CLASS_TABLE, error_class

# every errors_by_class starts with the table's classes at 0 ("other" is added only if it occurs)
ERROR_CLASSES = tuple(rule.key for rule in ERROR_CLASS_TABLE)


def p95(values: list[int]) -> int:
    """Nearest-rank 95th percentile (0 for no values)."""
    if not values:
        return 0
    ordered = sorted(values)
    return int(ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)])


@dataclass
class _ProviderAcc:
    latencies: list[int] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=lambda: dict.fromkeys(ERROR_CLASSES, 0))
    retry_count: int = 0
    items_succeeded: int = 0
    items_failed: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    retry_extra_tokens: int = 0


class StatsBuilder:
    """Feed items (``add_item``), then ``build(...)`` the contract's stats dict."""

    def __init__(self) -> None:
        self.providers: dict[str, _ProviderAcc] = {}
        self.succeeded = self.failed = self.cancelled = 0
        self.prompt_tokens = self.completion_tokens = self.retry_extra_tokens = 0

    def _acc(self, name: str) -> _ProviderAcc:
        acc = self.providers.get(name)
        if acc is None:
            acc = self.providers[name] = _ProviderAcc()
        return acc

    def add_item(
        self,
        status: str,
        attempt_log: Iterable[Mapping[str, Any]] | None,
        *,
        provider: str = "",
        prompt_tokens: int | None = None,
        completion_tokens: int | None = None,
    ) -> None:
        if status == "succeeded":
            self.succeeded += 1
        elif status == "failed":
            self.failed += 1
        elif status == "cancelled":
            self.cancelled += 1
        self.prompt_tokens += prompt_tokens or 0
        self.completion_tokens += completion_tokens or 0
        for index, attempt in enumerate(attempt_log or ()):
            acc = self._acc(attempt.get("provider") or "?")
            acc.latencies.append(int(attempt.get("latency_ms") or 0))
            if index > 0:
                acc.retry_count += 1
            error_type = attempt.get("error_type") or ""
            if error_type:
                key = error_class(error_type, attempt.get("status_code"))  # "other": only if it occurs
                acc.errors[key] = acc.errors.get(key, 0) + 1
            if attempt.get("used"):
                acc.prompt_tokens += int(attempt.get("prompt_tokens") or 0)
                acc.completion_tokens += int(attempt.get("completion_tokens") or 0)
            else:
                extra = int(attempt.get("tokens") or 0)
                acc.retry_extra_tokens += extra
                self.retry_extra_tokens += extra
        if provider and status in ("succeeded", "failed"):
            acc = self._acc(provider)
            if status == "succeeded":
                acc.items_succeeded += 1
            else:
                acc.items_failed += 1

    def build(self, batch_id: str, task_total: int, total_elapsed_ms: int) -> dict[str, Any]:
        providers: dict[str, dict[str, Any]] = {}
        for name in sorted(self.providers):
            acc = self.providers[name]
            lat = acc.latencies
            providers[name] = {
                "request_count": len(lat),
                "avg_latency_ms": int(round(sum(lat) / len(lat))) if lat else 0,
                "p95_latency_ms": p95(lat),
                "error_count": sum(acc.errors.values()),
                "retry_count": acc.retry_count,
                "rate_limited_count": acc.errors[CLASS_429],
                "errors_by_class": dict(acc.errors),
                "items_succeeded": acc.items_succeeded,
                "items_failed": acc.items_failed,
                "prompt_tokens": acc.prompt_tokens,
                "completion_tokens": acc.completion_tokens,
                "retry_extra_tokens": acc.retry_extra_tokens,
            }
        return {
            "batch_id": str(batch_id),
            "task_total": int(task_total),
            "success_count": self.succeeded,
            "failed_count": self.failed,
            "total_elapsed_ms": int(total_elapsed_ms),
            "providers": providers,
            "token_usage": {
                "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens,
                "retry_extra_tokens": self.retry_extra_tokens,
            },
        }


class ItemOutcome(Protocol):
    """What stats read of one item (the engine's ItemResult, or a stored BatchItem's fields)."""

    @property
    def status(self) -> str: ...
    @property
    def attempt_log(self) -> Iterable[Mapping[str, Any]] | None: ...
    @property
    def provider(self) -> str: ...
    @property
    def prompt_tokens(self) -> int | None: ...
    @property
    def completion_tokens(self) -> int | None: ...


def build_stats(
    batch_id: str, results: Iterable[ItemOutcome], task_total: int | None = None, total_elapsed_ms: int = 0
) -> dict[str, Any]:
    """Stats from engine ItemResults (anything with status/attempt_log/provider/prompt/completion tokens)."""
    builder = StatsBuilder()
    count = 0
    for r in results:
        count += 1
        builder.add_item(
            r.status,
            r.attempt_log,
            provider=r.provider,
            prompt_tokens=r.prompt_tokens,
            completion_tokens=r.completion_tokens,
        )
    return builder.build(batch_id, count if task_total is None else task_total, total_elapsed_ms)
