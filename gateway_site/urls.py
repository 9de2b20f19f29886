from django.contrib import admin
from django.db import connection
from django.http import JsonResponse
from django.urls import include, path


def healthz(request):
    """Liveness plus a database round-trip; Redis is checked by the quota engine's own health."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return JsonResponse({"ok": True})


admin.site.site_header = "Batch Gateway"
admin.site.site_title = "Batch Gateway admin"

urlpatterns = [
    path("admin/", admin.site.urls),
    path("healthz", healthz, name="healthz"),
    path("api/", include("batches.api.urls")),
    path("dashboard/", include("dashboard.urls")),
    path("v1/", include("openai_api.urls")),
]
