"""The batch page's staff actions (POST, CSRF): retry the failed items, cancel (GET asks for confirmation),
redeliver the webhook event. Each calls the same service as its API twin and comes back with a message."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpResponseNotAllowed
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from batches.execution import cancel_batch, cancellable
from batches.models import Batch, ItemStatus
from batches.retry import RetryRefused, retry_failed
from batches.selectors import item_status_counts
from batches.submission import SubmissionError
from webhooks import selectors as webhook_reads
from webhooks import services as webhook_services

from .access import REDELIVER_PERMISSION, permission_required


@require_POST
@permission_required("batches.retry_batch", "Retrying a team's failed items")
def batch_retry_failed(request, batch_id):
    """The batch page's "Retry failed items" button: the same service as POST …/retry_failed."""
    batch = get_object_or_404(Batch, pk=batch_id)
    try:
        new_batch = retry_failed(batch)
    except RetryRefused as exc:
        messages.warning(request, f"Not retried: {exc.message}")
        return redirect("dashboard:batch_detail", (exc.existing or batch).pk)
    except SubmissionError as exc:
        problems = "; ".join(f"{e.field}: {e.message}" for e in exc.errors[:5])
        messages.error(request, f"Not retried, nothing was stored ({exc.error_count} problem(s)): {problems}")
        return redirect("dashboard:batch_detail", batch.pk)
    messages.success(
        request, f"Re-submitted {new_batch.total_count} failed item(s) of batch {batch.pk} as this batch."
    )
    return redirect("dashboard:batch_detail", new_batch.pk)


@permission_required("batches.cancel_batch", "Cancelling a team's batch")
def batch_cancel(request, batch_id):
    """The batch page's "Cancel batch" link: GET asks for confirmation, POST (CSRF) cancels — the same
    service as POST /api/v1/batches/{id}/cancel: items not sent yet are cancelled, in-flight ones finish."""
    batch = get_object_or_404(Batch.objects.select_related("team"), pk=batch_id)
    if request.method == "POST":
        if not cancellable(batch):
            messages.warning(request, f"Not cancelled: the batch has already finished ({batch.status}).")
            return redirect("dashboard:batch_detail", batch.pk)
        batch = cancel_batch(str(batch.pk))
        running = item_status_counts(batch)[ItemStatus.RUNNING]
        messages.success(
            request,
            f"Cancelled batch {batch.pk}: {batch.cancelled_count:,} item(s) will not be sent"
            + (f"; {running:,} in flight finish" if running else "")
            + ".",
        )
        return redirect("dashboard:batch_detail", batch.pk)
    if request.method != "GET":
        return HttpResponseNotAllowed(["GET", "POST"])
    counts = item_status_counts(batch)
    return render(
        request,
        "dashboard/batch_cancel.html",
        {
            "nav": "batches",
            "batch": batch,
            "can_cancel": cancellable(batch),
            "pending": counts[ItemStatus.PENDING],
            "running": counts[ItemStatus.RUNNING],
        },
    )


@require_POST
@permission_required(REDELIVER_PERMISSION, "Redelivering a team's webhook event")
def batch_webhook_redeliver(request, batch_id):
    """The batch page's "Redeliver": the event again now, same webhook-id (webhooks.services.redeliver)."""
    batch = get_object_or_404(Batch, pk=batch_id)
    event = webhook_reads.event_for_batch(batch)
    if event is None:
        messages.warning(request, "This batch has no webhook event.")
    else:
        webhook_services.redeliver([event.pk])
        messages.success(request, f"Webhook event {event.pk} will be delivered again now.")
    return redirect("dashboard:batch_detail", batch.pk)
