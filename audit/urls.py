"""The config-history page, mounted under /dashboard/ by gateway_site.urls (same URL as before: the
dashboard links to it, but does not import audit — tests/architecture/test_layers.py)."""

from django.urls import path

from . import views

app_name = "audit"
urlpatterns = [path("history/", views.history, name="history")]
