"""Swagger UI at /api/docs/, with its assets served by this app.

The assets come from drf-spectacular-sidecar (no internet needed). They are served from
/api/docs/assets/ by this module rather than from STATIC_URL, so the page also works where nothing
serves static files (gunicorn with DEBUG off, e.g. `make up`).
"""

from __future__ import annotations

from pathlib import Path

import drf_spectacular_sidecar
from django.urls import reverse
from django.views.decorators.cache import cache_control
from django.views.static import serve
from drf_spectacular.views import SpectacularSwaggerView

ASSETS_DIR = (
    Path(drf_spectacular_sidecar.__file__).resolve().parent
    / "static"
    / "drf_spectacular_sidecar"
    / "swagger-ui-dist"
)


class SwaggerUIView(SpectacularSwaggerView):
    url_name = "api:schema"

    @staticmethod
    def _swagger_ui_resource(filename):
        return reverse("api:docs-asset", kwargs={"path": filename})

    @staticmethod
    def _swagger_ui_favicon():
        return reverse("api:docs-asset", kwargs={"path": "favicon-32x32.png"})


@cache_control(public=True, max_age=86400)
def docs_asset(request, path):
    # django.views.static.serve refuses paths outside ASSETS_DIR (safe_join → 400, missing → 404).
    return serve(request, path, document_root=str(ASSETS_DIR))
