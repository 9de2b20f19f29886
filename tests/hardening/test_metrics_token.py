"""Production settings require GATEWAY_METRICS_TOKEN (#29): /metrics labels carry team names with their
token counts and cost. Running without a token takes an explicit GATEWAY_METRICS_PUBLIC=on (metrics
reachable only on an internal listener).

Pre-fix: gateway_site.settings.production started without a token and /metrics answered anyone."""

from __future__ import annotations

import pytest
from django.test import override_settings

from .test_production_settings import GOOD_SECRET, settings_of

REDIS = "redis://127.0.0.1:6379/0"
TOKEN = "m3tr1cs-T0ken-for-the-tests-9f8e7d6c"


def test_production_refuses_to_start_without_a_metrics_token():
    result = settings_of(DJANGO_SECRET_KEY=GOOD_SECRET, REDIS_URL=REDIS)
    assert result.returncode != 0
    message = result.stderr.strip().splitlines()[-1]
    assert "ImproperlyConfigured" in message
    assert "GATEWAY_METRICS_TOKEN" in message and "GATEWAY_METRICS_PUBLIC=on" in message


@pytest.mark.parametrize("token", ["short", "x" * 40])
def test_a_short_or_non_random_metrics_token_is_refused(token):
    result = settings_of(DJANGO_SECRET_KEY=GOOD_SECRET, REDIS_URL=REDIS, GATEWAY_METRICS_TOKEN=token)
    assert result.returncode != 0
    assert "GATEWAY_METRICS_TOKEN" in result.stderr


def test_production_starts_with_a_token():
    result = settings_of(
        "GATEWAY_METRICS_TOKEN", DJANGO_SECRET_KEY=GOOD_SECRET, REDIS_URL=REDIS, GATEWAY_METRICS_TOKEN=TOKEN
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [TOKEN]


def test_public_metrics_is_an_explicit_opt_out():
    result = settings_of(
        "GATEWAY_METRICS_PUBLIC", DJANGO_SECRET_KEY=GOOD_SECRET, REDIS_URL=REDIS, GATEWAY_METRICS_PUBLIC="on"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True"]
    for off in ("off", "0", ""):
        refused = settings_of(DJANGO_SECRET_KEY=GOOD_SECRET, REDIS_URL=REDIS, GATEWAY_METRICS_PUBLIC=off)
        assert refused.returncode != 0 and "GATEWAY_METRICS_TOKEN must be set" in refused.stderr


def test_development_settings_keep_metrics_open():
    """settings.local (manage.py, make demo) is unchanged: no token needed there."""
    import os
    import subprocess
    import sys

    from .test_production_settings import ROOT

    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DJANGO_", "GATEWAY_", "REDIS_URL", "DATABASE_URL"))
    }
    code = "import gateway_site.settings.local as m; print(repr(m.GATEWAY_METRICS_TOKEN))"
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "''"


@pytest.mark.django_db
def test_the_token_protects_metrics():
    from django.test import Client

    client = Client()
    with override_settings(GATEWAY_METRICS_TOKEN=TOKEN):
        assert client.get("/metrics").status_code == 403
        assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 403
        ok = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
        assert ok.status_code == 200
        assert b"gateway_worker_metrics_collected" in ok.content
