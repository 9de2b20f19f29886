"""Production settings refuse example secrets and a missing REDIS_URL; TLS turns on secure cookies and
HSTS; plain HTTP still starts, with a warning (#13)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GOOD_SECRET = "Zq8v3Lr0xKp2WmYt5NbJ7cHs9DgEaFu1-_4Qo6Ri"
METRICS_TOKEN = "Hn4c-Wq9Tz2Lp7Rv5Xk8Bs3Dy6Fm1Jg"  # production requires one (#29, test_metrics_token.py)
SECRET_KEYS = "tQ4yJ1mZ0n8kQ3xv9wS6bC2dF5gH7jK1lM3nP5qR7sU="  # a Fernet key: production requires one


def settings_of(*names: str, **env) -> subprocess.CompletedProcess:
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DJANGO_", "REDIS_URL", "DATABASE_URL", "CELERY_", "GATEWAY_"))
    }
    clean["GATEWAY_SECRET_KEYS"] = SECRET_KEYS  # a test of its absence passes GATEWAY_SECRET_KEYS=""
    clean.update(env)
    shown = ", ".join(f"getattr(m, '{n}', False)" for n in names) or "''"
    code = (
        f"import importlib; m = importlib.import_module('gateway_site.settings.production'); print({shown})"
    )
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=clean, capture_output=True, text=True)


def example_secret() -> str:
    line = next(
        x for x in (ROOT / ".env.example").read_text().splitlines() if x.startswith("DJANGO_SECRET_KEY=")
    )
    return line.split("=", 1)[1]


@pytest.mark.parametrize("secret", [example_secret(), "a" * 40, "short"])
def test_example_short_or_non_random_secrets_are_refused(secret):
    """Pre-fix: the .env.example placeholder (and 40 × 'a') passed the production check."""
    result = settings_of(DJANGO_SECRET_KEY=secret, REDIS_URL="redis://127.0.0.1:6379/0")
    assert result.returncode != 0
    assert "DJANGO_SECRET_KEY" in result.stderr


def test_redis_url_is_required():
    result = settings_of(DJANGO_SECRET_KEY=GOOD_SECRET)
    assert result.returncode != 0
    assert "REDIS_URL is required in production" in result.stderr


def test_tls_turns_on_secure_cookies_and_hsts():
    result = settings_of(
        "SESSION_COOKIE_SECURE",
        "CSRF_COOKIE_SECURE",
        "SECURE_HSTS_SECONDS",
        "SECURE_SSL_REDIRECT",
        DJANGO_SECRET_KEY=GOOD_SECRET,
        REDIS_URL="redis://127.0.0.1:6379/0",
        GATEWAY_METRICS_TOKEN=METRICS_TOKEN,
        DJANGO_SECURE_SSL_REDIRECT="on",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "True", "31536000", "True"]
    assert "DJANGO_SECURE_SSL_REDIRECT is off" not in result.stderr


def test_plain_http_starts_with_a_warning():
    """The warning is one of GATEWAY_START_WARNINGS, which the web app logs once at start (#28,
    tests/firsthour/test_command_logs.py); importing the settings alone prints nothing."""
    result = settings_of(
        "SESSION_COOKIE_SECURE",
        "GATEWAY_START_WARNINGS",
        DJANGO_SECRET_KEY=GOOD_SECRET,
        REDIS_URL="redis://127.0.0.1:6379/0",
        GATEWAY_METRICS_TOKEN=METRICS_TOKEN,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[0] == "False"
    assert "DJANGO_SECURE_SSL_REDIRECT is off" in result.stdout
    assert "DJANGO_SECURE_SSL_REDIRECT is off" not in result.stderr


def test_production_refuses_to_start_without_provider_secret_keys():
    """Provider keys are stored sealed with GATEWAY_SECRET_KEYS: production has no default for it."""
    ok = dict(
        DJANGO_SECRET_KEY=GOOD_SECRET,
        REDIS_URL="redis://127.0.0.1:6379/0",
        GATEWAY_METRICS_TOKEN=METRICS_TOKEN,
    )
    missing = settings_of(**ok, GATEWAY_SECRET_KEYS="")
    assert missing.returncode != 0 and "GATEWAY_SECRET_KEYS must be set in production" in missing.stderr
    bad = settings_of(**ok, GATEWAY_SECRET_KEYS=f"{SECRET_KEYS},not-a-key")
    assert bad.returncode != 0 and "GATEWAY_SECRET_KEYS: key #2 is not a Fernet key" in bad.stderr
    assert "not-a-key" not in bad.stderr
    assert settings_of("GATEWAY_SECRET_KEYS", **ok).returncode == 0
