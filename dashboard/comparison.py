"""The dashboard's comparison page of an evaluation (a batch with ``targets``): per target its outcomes,
latency, tokens and cost, the agreement of each pair (batches.comparison, as the REST comparison shows
them), and with ``batches.view_content`` the answers side by side and the CSV export (custom_ids and
answers are the team's content)."""

from __future__ import annotations

from django.http import Http404, StreamingHttpResponse
from django.shortcuts import get_object_or_404, render

from batches import comparison
from batches.models import Batch

from .access import CONTENT_PERMISSION, permission_required, staff_required

SIDE_BY_SIDE_ROWS = 200  # the page's side-by-side table; the CSV has every row


def _evaluation(batch_id) -> Batch:
    batch = get_object_or_404(Batch.objects.select_related("team"), pk=batch_id)
    if not comparison.is_evaluation(batch):
        raise Http404("This batch has no targets: it is not an evaluation.")
    return batch


@staff_required
def batch_comparison(request, batch_id):
    batch = _evaluation(batch_id)
    can_read = request.user.has_perm(CONTENT_PERMISSION)
    figures = comparison.comparison(batch)
    rows = []
    if can_read:
        for row in comparison.csv_rows(batch):
            if len(rows) == SIDE_BY_SIDE_ROWS:
                break
            rows.append(_cells(row, len(batch.targets)))
    return render(
        request,
        "dashboard/batch_comparison.html",
        {
            "nav": "batches",
            "batch": batch,
            "figures": figures,
            "per_target": list(figures["per_target"].items()),
            "agreement": [
                {**a, "pct": None if a["rate"] is None else 100 * a["rate"]} for a in figures["agreement"]
            ],
            "can_read_content": can_read,
            "rows": rows,
            "rows_cut": can_read and len(rows) == SIDE_BY_SIDE_ROWS and figures["items"] > SIDE_BY_SIDE_ROWS,
        },
    )


def _cells(row: list, n_targets: int) -> dict:
    width = len(comparison.CSV_FIELDS)
    cells = [
        dict(zip(comparison.CSV_FIELDS, row[1 + i * width : 1 + (i + 1) * width], strict=True))
        for i in range(n_targets)
    ]
    return {"custom_id": row[0], "cells": cells}


@permission_required(CONTENT_PERMISSION, "The comparison's CSV (the team's custom_ids and answers)")
def batch_comparison_csv(request, batch_id):
    batch = _evaluation(batch_id)
    response = StreamingHttpResponse(comparison.csv_lines(batch), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="batch-{batch.id}-comparison.csv"'
    return response
