"""Re-run a finished batch's failed items as a new batch (API `retry_failed`, dashboard button).

The new batch goes through `batches.submission.submit_batch` like any other submission: every item is
validated again (a route deleted since fails with a 400 naming it, and nothing is stored), and it keeps
the original's custom_ids, route or provider, messages and params, priority, completion window and cache.
A pipeline (``steps``) is retried whole: its failed items run every step again from their own input.
Its metadata is the original's plus ``"retry_of": "<original batch id>"``; a batch is retried at most
once (retry the retry batch to go again), so a double click does not send the items twice.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from gateway_engine.errors import Conflict
from teams.models import ApiKey

from . import signals
from .models import TERMINAL_BATCH_STATUSES, Batch, BatchItem, ItemStatus
from .submission import BatchOptions, batch_options, submit_batch

RETRY_OF_KEY = "retry_of"


class RetryRefused(Conflict):
    """409: the batch cannot be retried now (running, nothing failed, or already retried: `existing`
    is that retry, named in the answer's `retry_batch_id`)."""

    code = "retry_refused"

    def __init__(self, message: str, existing: Batch | None = None):
        super().__init__(message)
        self.existing = existing

    def as_dict(self) -> dict[str, Any]:
        return {"detail": self.message, "retry_batch_id": str(self.existing.id) if self.existing else None}


def existing_retry(batch: Batch) -> Batch | None:
    """The batch that already re-ran `batch`'s failed items, if any."""
    return (
        Batch.objects.filter(team_id=batch.team_id, **{f"metadata__{RETRY_OF_KEY}": str(batch.id)})
        .order_by("created_at")
        .first()
    )


def failed_items_as_submission(batch: Batch) -> list[dict[str, Any]]:
    """The failed items of `batch` as submission ITEMs, in their original order."""
    rows = (
        BatchItem.objects.filter(batch=batch, status=ItemStatus.FAILED)
        .order_by("seq")
        .values_list("custom_id", "route", "requested_provider", "payload", "pipeline")
    )
    items = []
    for custom_id, route, requested_provider, payload, pipeline in rows:
        if pipeline is not None:  # a pipeline item runs every step again, from its own input
            items.append(pipeline_item(custom_id, pipeline))
            continue
        item: dict[str, Any] = {"custom_id": custom_id, "messages": payload["messages"]}
        if route:
            item["route"] = route
        else:
            item["provider"] = requested_provider
        if payload.get("params"):
            item["params"] = payload["params"]
        items.append(item)
    return items


def pipeline_item(custom_id: str, record: dict[str, Any]) -> dict[str, Any]:
    """A pipeline item as submitted: its input, its own target and params (batches.steps record)."""
    item: dict[str, Any] = {"custom_id": custom_id, "query": record.get("input") or ""}
    for key in ("route", "provider", "params"):
        if record.get(key):
            item[key] = record[key]
    return item


def _options_of(batch: Batch) -> BatchOptions:
    return batch_options(
        batch.priority,
        batch.completion_window or None,
        cache=batch.cache,
        webhook_url=batch.webhook_url or None,
        provider_batch=batch.provider_batch,
    )


@transaction.atomic
def retry_failed(batch: Batch, *, api_key: ApiKey | None = None) -> Batch:
    """Submit `batch`'s failed items as a new queued batch and return it.

    Raises RetryRefused (409) while the batch is still running, when it has no failed items, or when
    it was already retried; SubmissionError (400) when an item no longer validates (nothing stored).
    """
    batch = Batch.objects.select_for_update().get(pk=batch.pk)  # two clicks: the second waits, then sees
    if batch.status not in TERMINAL_BATCH_STATUSES or batch.completed_at is None:
        state = batch.status if batch.status not in TERMINAL_BATCH_STATUSES else f"{batch.status} (finishing)"
        raise RetryRefused(f"batch is {state}: its failed items can be retried once it has finished")
    previous = existing_retry(batch)
    if previous is not None:
        raise RetryRefused(
            f"already retried as batch {previous.id} (retry that batch to run its failures again)",
            existing=previous,
        )
    items = failed_items_as_submission(batch)
    if not items:
        raise RetryRefused("batch has no failed items to retry")
    metadata = {**(batch.metadata if isinstance(batch.metadata, dict) else {}), RETRY_OF_KEY: str(batch.id)}
    retry = submit_batch(
        team=batch.team,
        items=items,
        metadata=metadata,
        api_key=api_key,
        options=_options_of(batch),
        steps=batch.steps or None,
    )
    signals.batch_action.send(
        sender=Batch, model="batch", object_id=str(batch.id), object_repr=f"{batch.team.name} {batch.id}",
        action="retried", changes={"retry_batch": str(retry.id), "items": retry.total_count},
    )  # fmt: skip
    return retry
