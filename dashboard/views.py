"""Dashboard pages (staff only). Thin: filters in forms.py, queries in selectors/ (one module per page),
SVG in charts.py."""

from __future__ import annotations

import json

from django.core.paginator import Paginator
from django.http import Http404, StreamingHttpResponse
from django.shortcuts import get_object_or_404, render
from django.utils import timezone

from batches import signals
from batches.execution import cancellable
from batches.models import Batch, BatchItem, ItemStatus
from batches.selectors import item_status_counts
from gateway_engine.retry import error_class
from provider_batches import selectors as provider_batch_reads
from providers.adapters import provider_limits
from webhooks import selectors as webhook_reads

from . import charts, live
from .access import CONTENT_PERMISSION, REDELIVER_PERMISSION, permission_required, staff_required
from .forms import DEFAULT_WINDOW, BatchFilterForm, FailureFilterForm, UsageFilterForm
from .provider_rows import provider_row
from .selectors import batch_detail as detail_reads
from .selectors import capacity as capacity_reads
from .selectors import error_classes
from .selectors import failures as failure_reads
from .selectors import history as history_reads
from .selectors import interactive as interactive_reads
from .selectors import provider_rate as rate_reads
from .selectors import providers as provider_reads
from .selectors import queues as queue_reads
from .selectors import steps as step_reads
from .selectors import usage as usage_reads
from .usage_csv import usage_csv_lines

PAGE_SIZE = 50
RUNNING_REFRESH_SECONDS = 5
PROVIDERS_REFRESH_SECONDS = 10
MAX_JSON_CHARS = 100_000
FULL_CHART_WIDTH = 1200  # a chart across the page (the usage page)
HALF_CHART_WIDTH = 600  # the batch page's two side-by-side charts (drawn at ~1:1 in a 1280 px window)


def _page(request, qs, per_page: int = PAGE_SIZE):
    return Paginator(qs, per_page).get_page(request.GET.get("page"))


@staff_required
def batch_list(request):
    form = BatchFilterForm(request.GET)
    if form.is_valid():
        qs = history_reads.batch_history(
            team=form.cleaned_data["team"],
            status=form.cleaned_data["status"],
            date_from=form.cleaned_data["date_from"],
            date_to=form.cleaned_data["date_to"],
        )
    else:
        qs = Batch.objects.none()
    page = _page(request, qs)
    now = timezone.now()
    rows = [history_reads.summarize_batch(b, now) for b in page.object_list]
    any_running = any(not r.batch.is_terminal for r in rows)
    return render(
        request,
        "dashboard/batch_list.html",
        {
            "nav": "batches",
            "form": form,
            "page": page,
            "rows": rows,
            "refresh_seconds": RUNNING_REFRESH_SECONDS * 2 if any_running else None,
        },
    )


@staff_required
def batch_detail(request, batch_id):
    batch = get_object_or_404(Batch.objects.select_related("team"), pk=batch_id)
    summary = history_reads.summarize_batch(batch)
    batch_charts = _batch_charts(batch)
    status_counts = item_status_counts(batch)
    item_status = _item_status_choice(request.GET.get("items"), status_counts)
    page = _page(request, detail_reads.batch_items(batch, item_status or None))
    webhook_event = webhook_reads.event_for_batch(batch)
    # custom_ids, metadata and the webhook URL (often a bearer secret) are the team's content
    can_read = request.user.has_perm(CONTENT_PERMISSION)
    return render(
        request,
        "dashboard/batch_detail.html",
        {
            "nav": "batches",
            "batch": batch,
            "can_read_content": can_read,
            "can_redeliver": request.user.has_perm(REDELIVER_PERMISSION),
            "metadata_json": json.dumps(batch.metadata, ensure_ascii=False)
            if batch.metadata and can_read
            else "",
            "summary": summary,
            "status_counts": status_counts,
            "item_status": item_status,
            "item_filters": [(s, status_counts.get(s, 0)) for s in ITEM_FILTERS if s],
            "can_retry": batch.is_terminal
            and batch.completed_at is not None
            and status_counts["failed"] > 0
            and request.user.has_perm("batches.retry_batch"),
            "can_cancel": cancellable(batch) and request.user.has_perm("batches.cancel_batch"),
            "retry_origin": detail_reads.retry_origin(batch),
            "providers": detail_reads.provider_breakdown(batch),
            "steps": step_reads.step_rows(batch),
            "provider_batches": provider_batch_reads.provider_batches_of(batch),
            "error_classes": error_classes.ERROR_CLASSES,
            "token_usage": (batch.stats or {}).get("token_usage") or {},
            "endpoint_usage": {
                e: part.get("token_usage") or {}
                for e, part in ((batch.stats or {}).get("endpoints") or {}).items()
            },
            "has_stats": bool((batch.stats or {}).get("providers")),
            **batch_charts,
            "page": page,
            "refresh_seconds": None if batch.is_terminal else RUNNING_REFRESH_SECONDS,
            "webhook_event": webhook_event,
            "webhook_attempts": webhook_reads.attempts_of(webhook_event) if webhook_event else [],
            **_place_context(batch),
        },
    )


def _batch_charts(batch: Batch) -> dict:
    """The batch page's two side-by-side charts: latency histogram and progress over time."""
    return {"latency_chart": _latency_chart(batch), "progress_chart": _progress_chart(batch)}


def _latency_chart(batch: Batch):
    histogram = detail_reads.latency_histogram(batch)
    return charts.bar_chart(
        [label for label, _ in histogram],
        [n for _, n in histogram],
        title="Latency of finished items (last attempt)",
        width=HALF_CHART_WIDTH,
    )


def _progress_chart(batch: Batch):
    unit, progress = detail_reads.progress_over_time(batch)
    fmt = {"minute": "%H:%M", "hour": "%m-%d %H:00", "day": "%Y-%m-%d"}[unit]
    return charts.stacked_bar_chart(
        [bucket.strftime(fmt) for bucket, _, _ in progress],
        [
            charts.Series("succeeded", "#59a14f", [ok for _, ok, _ in progress]),
            charts.Series("failed", "#e15759", [failed for _, _, failed in progress]),
        ],
        title=f"Items finished per {unit} (UTC)",
        height=220,
        width=HALF_CHART_WIDTH,
    )


# The batch page lists its items: failed ones first when there are any, else all (every item reachable).
ITEM_FILTERS = ("", *ItemStatus.values)


def _item_status_choice(value: str | None, status_counts: dict[str, int]) -> str:
    if value is None:
        return ItemStatus.FAILED if status_counts.get(ItemStatus.FAILED) else ""
    return value if value in ITEM_FILTERS else ""


def _place_context(batch) -> dict:
    place = queue_reads.batch_place(batch)
    etas = [p.eta_seconds for p in place if p.eta_seconds is not None]
    return {"place": place, "place_eta": max(etas) if etas else None}


def _pretty(value) -> str:
    if value is None:
        return ""
    text = json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False)
    if len(text) > MAX_JSON_CHARS:
        text = text[:MAX_JSON_CHARS] + f"\n… truncated ({len(text):,} characters in total)"
    return text


ATTEMPT_KEYS = ("provider", "status_code", "error_type", "latency_ms", "tokens", "at")


def _attempt_row(entry) -> dict:
    """One attempt_log entry with the known keys, anything else folded into "other"."""
    if not isinstance(entry, dict):
        return {"other": str(entry)}
    row = {key: entry.get(key) for key in ATTEMPT_KEYS}
    row["other"] = ", ".join(f"{k}={v}" for k, v in entry.items() if k not in ATTEMPT_KEYS)
    return row


@permission_required(CONTENT_PERMISSION, "Reading a team's prompts and answers")
def item_detail(request, item_id: int):
    try:
        item = detail_reads.item_detail(item_id)
    except BatchItem.DoesNotExist:
        raise Http404("No such batch item") from None
    signals.batch_action.send(
        sender=BatchItem, model="batch", object_id=str(item.batch_id), object_repr=f"item {item.custom_id}",
        action="viewed", changes={"item": item.pk},
    )  # fmt: skip
    attempts = [_attempt_row(a) for a in (item.attempt_log or [])]
    return render(
        request,
        "dashboard/item_detail.html",
        {
            "nav": "batches",
            "item": item,
            "error_class": error_class(item.error_type, item.error_status_code)
            if item.error_type or item.error_status_code
            else "",
            "request_json": _pretty(item.payload),
            "response_json": _pretty(item.response),
            # the provider's own answer, when the response is its OpenAI translation (#21)
            "native_json": _pretty(item.native_response) if item.native_response is not None else "",
            "attempts": attempts,
        },
    )


@staff_required
def failures(request):
    data = request.GET.copy()
    if not data.get("window"):
        data["window"] = DEFAULT_WINDOW  # so the select shows the window actually applied
    form = FailureFilterForm(data, provider_names=failure_reads.provider_names())
    if form.is_valid():
        since, until = form.time_bounds()
        qs = failure_reads.failures(
            provider=form.cleaned_data["provider"],
            error_class=form.cleaned_data["error_class"],
            status_code=form.cleaned_data["status_code"],
            team=form.cleaned_data["team"],
            batch_id=form.cleaned_data["batch"],
            since=since,
            until=until,
        )
    else:
        since = until = None
        qs = BatchItem.objects.none()
    groups = failure_reads.failure_groups(qs)
    page = _page(request, failure_reads.failure_list(qs))
    interactive = []
    if form.is_valid():
        interactive = list(
            interactive_reads.interactive_failures(
                provider=form.cleaned_data["provider"],
                team=form.cleaned_data["team"],
                since=since,
                until=until,
            )[: interactive_reads.FAILED_SHOWN]
        )
    return render(
        request,
        "dashboard/failures.html",
        {
            "nav": "failures",
            "form": form,
            "can_read_content": request.user.has_perm(CONTENT_PERMISSION),
            "groups": groups,
            "page": page,
            "since": since,
            "until": until,
            "interactive": interactive,
            "interactive_shown": interactive_reads.FAILED_SHOWN,
        },  # fmt: skip
    )


@staff_required
def providers(request):
    pairs = provider_reads.provider_configs()
    limits = [provider_limits(p) for _, p in pairs]
    quota = live.quota_states(limits)
    breakers = live.breaker_states([view.name for view, _ in pairs])
    pauses = live.pause_states([view.name for view, _ in pairs])
    recent = provider_reads.recent_activity()
    interactive = interactive_reads.recent_interactive()
    rows = [provider_row(view, quota, breakers, recent, pauses) for view, _provider in pairs]
    for row in rows:
        row["interactive"] = interactive.get(row["config"].name)
    rate_status = [rate_reads.rate_status(p, row) for (_view, p), row in zip(pairs, rows, strict=True)]
    return render(
        request,
        "dashboard/providers.html",
        {
            "nav": "providers",
            "rows": rows,
            "quota_error": quota.error,
            "breaker_error": breakers.error,
            "pause_error": pauses.error,
            "recent_minutes": int(provider_reads.RECENT_WINDOW.total_seconds() // 60),
            "advice": capacity_reads.capacity_advice(rows),
            "refresh_seconds": PROVIDERS_REFRESH_SECONDS,
            "now": timezone.now(),
            "queues": queue_reads.queued_items_by_provider(),
            "provider_batch_work": provider_batch_reads.enqueued_by_provider(),
            "rate_status": rate_status,
        },
    )


@staff_required
def usage(request):
    form = UsageFilterForm(_with_usage_defaults(request.GET))
    context = {"nav": "usage", "form": form}
    if form.is_valid():
        start, end = form.cleaned_data["date_from"], form.cleaned_data["date_to"]
        qs = usage_reads.usage_rows(date_from=start, date_to=end, team=form.cleaned_data["team"])
        per_day = usage_reads.usage_by_day(qs, start, end)
        context.update(
            date_from=start,
            date_to=end,
            by_team_day=usage_reads.usage_by_team_day(qs),
            by_team_provider=(by_team_provider := usage_reads.usage_by_team_provider(qs)),
            cost_totals=usage_reads.team_provider_costs(by_team_provider),
            rate_limits=usage_reads.team_rate_limits(form.cleaned_data["team"]),
            totals={
                k: sum(r[k] for r in per_day)
                for k in (
                    "prompt",
                    "completion",
                    "wasted",
                    "total",
                    "requests",
                    "realtime_total",
                    "batch_total",
                    "items_failed",
                )  # fmt: skip
            },
            chart=charts.stacked_bar_chart(
                [d["day"].strftime("%m-%d") for d in per_day],
                [
                    charts.Series("prompt", "#3b6fb6", [d["prompt"] for d in per_day]),
                    charts.Series("completion", "#59a14f", [d["completion"] for d in per_day]),
                    charts.Series("wasted (retries)", "#e15759", [d["wasted"] for d in per_day]),
                ],
                title="Tokens per day",
                width=FULL_CHART_WIDTH,
            ),
            csv_query=request.GET.urlencode(),
        )
    return render(request, "dashboard/usage.html", context)


def _with_usage_defaults(query):
    """Show the date range actually applied: empty date fields get the form's defaults."""
    data = query.copy()
    if not data.get("date_from") or not data.get("date_to"):
        probe = UsageFilterForm(query)
        if probe.is_valid():
            data["date_from"] = probe.cleaned_data["date_from"].isoformat()
            data["date_to"] = probe.cleaned_data["date_to"].isoformat()
    return data


@staff_required
def usage_csv(request):
    form = UsageFilterForm(request.GET)
    if not form.is_valid():
        errors = "; ".join(f"{field}: {' '.join(msgs)}" for field, msgs in form.errors.items())
        return render(
            request, "dashboard/usage.html", {"nav": "usage", "form": form, "csv_error": errors}, status=400
        )
    start, end = form.cleaned_data["date_from"], form.cleaned_data["date_to"]
    qs = usage_reads.usage_rows(date_from=start, date_to=end, team=form.cleaned_data["team"])
    response = StreamingHttpResponse(usage_csv_lines(qs), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="team-usage_{start}_{end}.csv"'
    return response
