from django.contrib import admin
from django.urls import include, path

from observability import views as ops

admin.site.site_header = "Batch Gateway"
admin.site.site_title = "Batch Gateway admin"

urlpatterns = [
    path("admin/", admin.site.urls),
    path("healthz", ops.healthz, name="healthz"),
    path("readyz", ops.readyz, name="readyz"),
    path("metrics", ops.metrics, name="metrics"),
    path("api/", include("batches.api.urls")),
    path("dashboard/", include("dashboard.urls")),
    path("v1/", include("openai_api.urls")),
]
