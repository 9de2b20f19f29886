import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from gateway_site.env import env_bool, env_float, env_int, env_url

ROOT = Path(__file__).resolve().parent.parent


def test_env_int_refuses_garbage_and_bounds(monkeypatch):
    monkeypatch.setenv("X_INT", "12")
    assert env_int("X_INT", 1) == 12
    monkeypatch.setenv("X_INT", "twelve")
    with pytest.raises(ImproperlyConfigured, match="X_INT"):
        env_int("X_INT", 1)
    monkeypatch.setenv("X_INT", "0")
    with pytest.raises(ImproperlyConfigured, match="X_INT=0 is below the minimum 1"):
        env_int("X_INT", 5, minimum=1)
    monkeypatch.delenv("X_INT")
    assert env_int("X_INT", 5, minimum=1) == 5


def test_env_bool_refuses_unknown_words(monkeypatch):
    monkeypatch.setenv("X_BOOL", "yes")
    assert env_bool("X_BOOL", False) is True
    monkeypatch.setenv("X_BOOL", "off")
    assert env_bool("X_BOOL", True) is False
    monkeypatch.setenv("X_BOOL", "maybe")
    with pytest.raises(ImproperlyConfigured, match="X_BOOL"):
        env_bool("X_BOOL", False)


def test_env_float_and_url(monkeypatch):
    monkeypatch.setenv("X_F", "2.5")
    assert env_float("X_F", 1.0, maximum=5) == 2.5
    monkeypatch.setenv("X_F", "9")
    with pytest.raises(ImproperlyConfigured, match="maximum"):
        env_float("X_F", 1.0, maximum=5)
    monkeypatch.setenv("X_URL", "http://nope")
    with pytest.raises(ImproperlyConfigured, match="X_URL"):
        env_url("X_URL", None, schemes=("redis",))
    monkeypatch.setenv("X_URL", "redis://127.0.0.1:6379/1")
    assert env_url("X_URL", None, schemes=("redis",)) == "redis://127.0.0.1:6379/1"


def _import_settings(module: str, **env) -> subprocess.CompletedProcess:
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DJANGO_", "REDIS_URL", "DATABASE_URL", "CELERY_", "GATEWAY_"))
    }
    clean.update(env)
    code = f"import importlib; m = importlib.import_module({module!r}); print(m.GATEWAY_QUOTA_BACKEND, m.CELERY_TASK_ALWAYS_EAGER)"
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=clean, capture_output=True, text=True)


def test_production_refuses_to_start_without_secret():
    result = _import_settings("gateway_site.settings.production")
    assert result.returncode != 0
    assert "DJANGO_SECRET_KEY" in result.stderr


def test_production_starts_with_secret_and_redis_selects_shared_mode():
    result = _import_settings(
        "gateway_site.settings.production",
        DJANGO_SECRET_KEY="Zq8v3Lr0xKp2WmYt5NbJ7cHs9DgEaFu1-_4Qo6Ri",
        REDIS_URL="redis://127.0.0.1:6379/0",
        GATEWAY_METRICS_TOKEN="Hn4c-Wq9Tz2Lp7Rv5Xk8Bs3Dy6Fm1Jg",  # production requires one (#29)
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["redis", "False"]


def test_without_redis_url_runs_single_process_mode():
    result = _import_settings("gateway_site.settings.local")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["local", "True"]


def test_bad_redis_url_is_refused_by_name():
    result = _import_settings("gateway_site.settings.local", REDIS_URL="http://127.0.0.1:6379")
    assert result.returncode != 0
    assert "REDIS_URL" in result.stderr


def test_unknown_provider_transport_is_refused_by_name():
    result = _import_settings("gateway_site.settings.local", GATEWAY_PROVIDER_TRANSPORT="requests")
    assert result.returncode != 0
    assert "GATEWAY_PROVIDER_TRANSPORT='requests': must be 'aiohttp' or 'httpx'" in result.stderr
    assert _import_settings("gateway_site.settings.local", GATEWAY_PROVIDER_TRANSPORT="httpx").returncode == 0


# --- single-process mode only where it is safe (#28) ------------------------------------------------
POSTGRES = "postgres://postgres@127.0.0.1:5432/gateway"  # settings load without connecting


def test_postgresql_without_redis_url_is_refused_by_name():
    """Before: single-process mode (in-process quotas) next to a shared PostgreSQL, silently."""
    result = _import_settings("gateway_site.settings.local", DATABASE_URL=POSTGRES)
    assert result.returncode != 0
    assert "REDIS_URL is not set and DATABASE_URL is postgresql, not SQLite" in result.stderr


def test_gateway_single_process_allows_postgresql_without_redis_explicitly():
    result = _import_settings(
        "gateway_site.settings.local", DATABASE_URL=POSTGRES, GATEWAY_SINGLE_PROCESS="1"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["local", "True"]


def test_gateway_single_process_off_refuses_sqlite_without_redis():
    result = _import_settings("gateway_site.settings.local", GATEWAY_SINGLE_PROCESS="0")
    assert result.returncode != 0
    assert "REDIS_URL is not set and GATEWAY_SINGLE_PROCESS is off" in result.stderr


def test_gateway_single_process_with_redis_url_is_a_contradiction():
    result = _import_settings(
        "gateway_site.settings.local", REDIS_URL="redis://127.0.0.1:6379/0", GATEWAY_SINGLE_PROCESS="1"
    )
    assert result.returncode != 0
    assert "GATEWAY_SINGLE_PROCESS is on but REDIS_URL is set" in result.stderr


def test_test_settings_on_postgresql_bring_their_own_redis_url():
    """The pytest process and its subprocesses use gateway_site.settings.test: REDIS_URL defaults there."""
    result = _import_settings("gateway_site.settings.test", DATABASE_URL=POSTGRES)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[0] == "redis"
