"""Provider API keys (database or environment) never appear on any dashboard page."""

from __future__ import annotations

from providers.adapters import provider_key

from .pages import all_pages
from .seed import DB_SECRET, ENV_SECRET


def test_no_page_shows_a_provider_secret(staff_client, seeded):
    pages = all_pages(seeded)
    for name, url in pages.items():
        response = staff_client.get(url)
        assert response.status_code == 200, name
        body = b"".join(response.streaming_content) if response.streaming else response.content
        assert DB_SECRET.encode() not in body, name
        assert ENV_SECRET.encode() not in body, name
        assert b"sk-db-secret" not in body and b"sk-env-secret" not in body, name


def test_providers_page_says_where_the_key_comes_from(staff_client, seeded):
    response = staff_client.get(all_pages(seeded)["providers"])
    rows = {r["config"].name: r["config"] for r in response.context["rows"]}
    assert rows["alpha"].key_source == "database"
    assert rows["beta"].key_source == "environment"
    assert rows["local"].key_source == "none"
    assert not hasattr(rows["alpha"], "api_key")
    assert b"set (database)" in response.content and b"set (environment)" in response.content


def test_admin_and_dashboard_show_the_same_key_source(staff_client, admin_client, seeded):
    """One property, Provider.api_key_source, behind both the dashboard's providers page and the
    admin's change page (and the key actually sent)."""
    from django.contrib import admin
    from django.urls import reverse

    from providers.models import Provider

    response = staff_client.get(all_pages(seeded)["providers"])
    shown = {r["config"].name: r["config"].key_source for r in response.context["rows"]}
    assert set(shown.values()) == {"environment", "database", "none"}
    provider_admin = admin.site._registry[Provider]
    for provider in Provider.objects.all():
        assert shown[provider.name] == provider.api_key_source
        assert provider_admin.key_source(provider).startswith(provider.api_key_source + " ")
        page = admin_client.get(reverse("admin:providers_provider_change", args=[provider.pk]))
        assert provider_admin.key_source(provider).encode() in page.content
        assert provider.has_api_key == (provider.api_key_source != "none")
        expected = {"environment": ENV_SECRET, "database": DB_SECRET, "none": ""}[provider.api_key_source]
        assert provider_key(provider) == expected
