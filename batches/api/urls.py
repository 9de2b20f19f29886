from django.urls import path
from drf_spectacular.views import SpectacularAPIView

from . import (
    comparison_views,
    docs,
    schema,  # noqa: F401  (registers the bearer-auth scheme with drf-spectacular)
    views,
)

# Paths nothing here matches (unknown, malformed, or differing only by a trailing slash) fall through to
# gateway_site.errors.path_fallback, the project's last URL pattern: JSON 404 or the slash twin's view.
app_name = "api"
urlpatterns = [
    path("v1/batches", views.BatchListCreateView.as_view(), name="batches"),
    # <str:…>, not <uuid:…>: a malformed id is "batch not found" (JSON 404), like another team's batch
    path("v1/batches/<str:batch_id>", views.BatchDetailView.as_view(), name="batch-detail"),
    path("v1/batches/<str:batch_id>/results", views.BatchResultsView.as_view(), name="batch-results"),
    path("v1/batches/<str:batch_id>/cancel", views.BatchCancelView.as_view(), name="batch-cancel"),
    path(
        "v1/batches/<str:batch_id>/retry_failed",
        views.BatchRetryFailedView.as_view(),
        name="batch-retry-failed",
    ),
    path(
        "v1/batches/<str:batch_id>/comparison",
        comparison_views.BatchComparisonView.as_view(),
        name="batch-comparison",
    ),
    path("v1/usage", views.UsageView.as_view(), name="usage"),
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    path("docs/", docs.SwaggerUIView.as_view(), name="docs"),
    path("docs/assets/<path:path>", docs.docs_asset, name="docs-asset"),
]
