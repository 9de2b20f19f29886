"""What the pages read about provider batches (one query each)."""

from __future__ import annotations

from django.db.models import Count, Sum
from django.utils import timezone

from batches.models import Batch

from .models import OPEN_STATES, ProviderBatch


def provider_batches_of(batch: Batch) -> list[dict]:
    """The batch page's rows: each provider batch with its id, state, counts and age (seconds)."""
    now = timezone.now()
    rows = []
    for pb in ProviderBatch.objects.filter(batch=batch).order_by("created_at"):
        end = pb.ended_at or now
        rows.append(
            {
                "id": pb.id,
                "provider": pb.provider,
                "remote_id": pb.remote_id,
                "state": pb.state,
                "remote_state": pb.remote_state or "—",
                "lines": pb.line_count,
                "succeeded": pb.succeeded_count,
                "errored": pb.errored_count,
                "canceled": pb.canceled_count,
                "expired": pb.expired_count,
                "applied": pb.applied_count,
                "realtime": pb.realtime_count,
                "http_calls": pb.http_calls,
                "cancel_reason": pb.cancel_reason,
                "age_seconds": int((end - pb.created_at).total_seconds()),
                "note": pb.note,
            }
        )
    return rows


def enqueued_by_provider() -> dict[str, dict[str, int]]:
    """provider → {"batches", "lines"} of its open provider batches (the providers page)."""
    rows = (
        ProviderBatch.objects.filter(state__in=OPEN_STATES)
        .values("provider")
        .annotate(batches=Count("id"), lines=Sum("line_count"))
        .order_by()
    )
    return {r["provider"]: {"batches": int(r["batches"]), "lines": int(r["lines"] or 0)} for r in rows}


def counts_by_state() -> dict[tuple[str, str], int]:
    """(provider, state) → provider batches (the metrics gauge)."""
    rows = ProviderBatch.objects.values_list("provider", "state").annotate(n=Count("id")).order_by()
    return {(p, s): int(n) for p, s, n in rows}


def lines_by_outcome() -> dict[tuple[str, str], int]:
    """(provider, outcome) → lines over every provider batch: succeeded, errored, canceled, expired
    (as the provider reported them), and applied / to_realtime (what the gateway did with them)."""
    rows = (
        ProviderBatch.objects.values("provider")
        .annotate(
            succeeded=Sum("succeeded_count"),
            errored=Sum("errored_count"),
            canceled=Sum("canceled_count"),
            expired=Sum("expired_count"),
            applied=Sum("applied_count"),
            to_realtime=Sum("realtime_count"),
        )
        .order_by()
    )
    out: dict[tuple[str, str], int] = {}
    for r in rows:
        for outcome in ("succeeded", "errored", "canceled", "expired", "applied", "to_realtime"):
            out[(r["provider"], outcome)] = int(r[outcome] or 0)
    return out
