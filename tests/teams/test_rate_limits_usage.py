"""A team's RPM / TPM limits and their use where a user and an operator look (issue #37): ``rate_limits`` in
GET /api/v1/usage (docs/api.md), the usage page, the Team admin (a list-editable field whose save
reaches the workers' limits). The use is what the shared quota store granted (Redis)."""

from __future__ import annotations

import asyncio

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from gateway_engine.quota import ProviderLimits
from providers.limits import get_quota_store
from teams.limits import limits_of, team_limits
from teams.models import Team

pytestmark = pytest.mark.django_db


def granted(team: Team, *token_counts: int) -> None:
    """Grants of the team on a provider through the process's quota store, as the engine takes them."""
    limits = ProviderLimits("usage-p", rpm=60_000, tpm=10**8, burst_seconds=1.0, max_concurrency=4,
                            timeout_seconds=5.0)  # fmt: skip
    store = get_quota_store()

    async def grant() -> None:
        try:
            for tokens in token_counts:
                await store.acquire(limits, tokens, team=team_limits(team).quota())
        finally:
            await store.aclose()

    asyncio.run(grant())


def usage(team: Team, api_key) -> dict:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key[1]}")
    response = client.get("/api/v1/usage")
    assert response.status_code == 200, response.content
    return response.json()["rate_limits"]


def test_usage_shows_the_limits_and_what_the_store_granted(team, api_key, redis_sync, settings):
    settings.GATEWAY_TEAM_BURST_SECONDS = 6.0
    team.tpm_limit = 60_000  # holds 6,000 tokens
    team.save()
    granted(team, 1_000, 1_500)
    shown = usage(team, api_key)
    assert shown["rpm"] == {"limit": None, "used_last_minute": None, "available_now": None}
    assert shown["tpm"]["limit"] == 60_000 and shown["tpm"]["used_last_minute"] == 2_500
    assert 3_500 <= shown["tpm"]["available_now"] < 6_000  # 6,000 − 2,500 + what refilled (900/s) meanwhile
    assert shown["burst_seconds"] == 6.0


def test_a_team_without_limits_shows_nulls_and_is_not_counted(team, api_key, redis_sync):
    granted(team, 700)
    assert usage(team, api_key) == {
        "rpm": {"limit": None, "used_last_minute": None, "available_now": None},
        "tpm": {"limit": None, "used_last_minute": None, "available_now": None},
        "burst_seconds": limits_of(team).burst_seconds,
    }
    assert not list(redis_sync.scan_iter(match="*team:{acme}*"))  # no team key written


def test_the_usage_page_and_the_admin_show_them(client, team, redis_sync):
    team.rpm_limit = 120
    team.save()
    granted(team, 10, 10, 10)
    operator = get_user_model().objects.create_superuser("root", "root@example.com", "root-pass-123")
    client.force_login(operator)
    page = client.get("/dashboard/usage/").content.decode()
    table = page[page.index('id="team-rate-limits"') :]
    assert "acme" in table and '<td class="n">120</td><td class="n">3</td>' in table
    change = client.get(f"/admin/teams/team/{team.pk}/change/").content.decode()
    assert "RPM: 3 of 120" in change and "TPM: unlimited" in change
    # the admin's list edits the limit (the save every worker reloads on commit)
    form = {"form-TOTAL_FORMS": "1", "form-INITIAL_FORMS": "1", "form-0-id": str(team.pk),
            "form-0-weight": "1", "form-0-rpm_limit": "240", "form-0-tpm_limit": "", "_save": "Save"}  # fmt: skip
    answer = client.post("/admin/teams/team/", form)
    assert answer.status_code == 302, answer.content.decode()[:2000]
    team.refresh_from_db()
    assert team.rpm_limit == 240 and team.tpm_limit is None
