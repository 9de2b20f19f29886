"""The configuration history page of the dashboard (staff only)."""

from __future__ import annotations

from django.core.paginator import Paginator
from django.shortcuts import render

from dashboard.access import staff_required

from . import selectors

PAGE_SIZE = 50


@staff_required
def history(request):
    model = request.GET.get("model", "")
    if model not in selectors.MODELS:
        model = ""
    search = request.GET.get("q", "")[:100]
    page = Paginator(selectors.config_history(model=model, object_repr=search), PAGE_SIZE).get_page(
        request.GET.get("page")
    )
    rows = [(change, selectors.change_lines(change)) for change in page.object_list]
    return render(
        request,
        "dashboard/history.html",
        {
            "nav": "history",
            "page": page,
            "rows": rows,
            "models": selectors.MODELS,
            "model": model,
            "q": search,
        },
    )
