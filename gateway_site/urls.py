from django.contrib import admin
from django.http import HttpResponse
from django.shortcuts import redirect
from django.urls import include, path, re_path
from django.views.decorators.cache import cache_control

from interactive import views as interactive
from observability import views as ops

from . import errors

# A small SVG icon: browsers ask for /favicon.ico on every page (a 404 there is a console error).
FAVICON_SVG = (
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32">'
    '<rect width="32" height="32" rx="6" fill="#264b5d"/>'
    '<path d="M7 9h18v4H7zm0 6h18v4H7zm0 6h12v4H7z" fill="#f5dd5d"/></svg>'
)


@cache_control(public=True, max_age=86400)
def favicon(request):
    return HttpResponse(FAVICON_SVG, content_type="image/svg+xml")


def home(request):
    """`/` (the admin's "View site"): staff to the dashboards, everyone else to the API docs (Swagger UI)."""
    user = request.user
    if user.is_authenticated and user.is_active and user.is_staff:
        return redirect("dashboard:batches")
    return redirect("api:docs")


admin.site.site_header = "Batch Gateway"
admin.site.site_title = "Batch Gateway admin"
# The app list is one click away (Home); without the sidebar a changelist has the full 1280 px.
admin.site.enable_nav_sidebar = False

urlpatterns = [
    path("", home, name="home"),
    path("admin/", admin.site.urls),
    path("healthz", ops.healthz, name="healthz"),
    path("readyz", ops.readyz, name="readyz"),
    path("metrics", ops.metrics, name="metrics"),
    path("api/", include("batches.api.urls")),
    path("dashboard/", include("dashboard.urls")),
    path("dashboard/", include("audit.urls")),  # /dashboard/history/
    # the interactive lane (async views: served by gateway_site.asgi, docs/interactive.md)
    path("v1/chat/completions", interactive.chat_completions, name="chat-completions"),
    path("v1/models", interactive.models, name="models"),
    path("v1/responses", interactive.responses, name="responses"),
    path("v1/messages", interactive.messages, name="messages"),
    path("v1/embeddings", interactive.embeddings, name="embeddings"),
    path("v1/", include("openai_api.urls")),
    path("favicon.ico", favicon, name="favicon"),
    # Keep this last: whatever nothing above matched under /api/ and /v1/ answers JSON (gateway_site/errors.py).
    re_path(r"^(?:api|v1)(?:/.*)?$", errors.path_fallback),
]

handler404 = errors.handler404
handler500 = errors.handler500
