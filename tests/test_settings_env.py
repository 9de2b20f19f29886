import ast
import os
import re
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
        GATEWAY_SECRET_KEYS="tQ4yJ1mZ0n8kQ3xv9wS6bC2dF5gH7jK1lM3nP5qR7sU=",  # and one for provider keys
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


# --- README's configuration table names every variable the settings read (#28) ---------------------
ENV_READERS = {"env_str", "env_int", "env_bool", "env_float", "env_url", "env_list", "getenv"}


def _is_environ(node: ast.AST) -> bool:
    return (isinstance(node, ast.Name) and node.id == "environ") or (
        isinstance(node, ast.Attribute) and node.attr == "environ"
    )


def env_names_read(path: Path) -> set[str]:
    """Names of the environment variables a module reads: the first argument of env_str/env_int/… and
    of os.environ.get/setdefault/pop/[…] (a string, or a module-level string constant)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    constants = {
        target.id: node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
        for target in node.targets
        if isinstance(target, ast.Name)
    }

    def literal(node: ast.AST) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        return constants.get(node.id) if isinstance(node, ast.Name) else None

    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args:
            func = node.func
            called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            on_environ = isinstance(func, ast.Attribute) and _is_environ(func.value)
            if called in ENV_READERS or (on_environ and called in ("get", "setdefault", "pop")):
                names.add(literal(node.args[0]) or "")
        elif isinstance(node, ast.Subscript) and _is_environ(node.value):
            names.add(literal(node.slice) or "")
    # upper-case names only: prometheus_client's legacy lower-case alias is its own business
    return {name for name in names if re.fullmatch(r"[A-Z][A-Z0-9_]*", name)}


def settings_env_names() -> dict[str, set[str]]:
    """{module: names} for every settings module and what the settings call while loading
    (observability/metrics_dir.py). test.py is left out: its variables are the test runner's
    (TEST_DB_SUFFIX, docs/testing.md) or read by base.py anyway."""
    sources = [p for p in sorted((ROOT / "gateway_site" / "settings").glob("*.py")) if p.name != "test.py"]
    sources.append(ROOT / "observability" / "metrics_dir.py")
    return {str(p.relative_to(ROOT)): env_names_read(p) for p in sources}


def readme_env_names() -> set[str]:
    """Every variable named in the first column of README's "## Configuration" table."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Configuration") :]
    section = section[: section.index("\n## ", 1)]
    names: set[str] = set()
    for line in section.splitlines():
        if line.startswith("| `"):
            names |= set(re.findall(r"`([A-Z][A-Z0-9_]*)", line.split("|")[1]))
    return names


def test_the_reader_finds_env_names_the_way_settings_read_them(tmp_path):
    module = tmp_path / "m.py"
    module.write_text(
        "import os\nfrom os import environ\nSWITCH = 'B_SWITCH'\n"
        "A = env_int('A_INT', 1, minimum=0)\nB = environ.get(SWITCH)\nC = os.environ['C_RAW']\n"
        "os.environ.setdefault('D_DEFAULT', 'x')\nE = os.getenv('E_GET')\nF = env_str(name)\n"
        "G = environ.get('lower_case')\n"
    )
    assert env_names_read(module) == {"A_INT", "B_SWITCH", "C_RAW", "D_DEFAULT", "E_GET"}


def test_readme_configuration_table_names_every_variable_the_settings_read():
    """Before: DJANGO_CSRF_TRUSTED_ORIGINS, DATABASE_CONN_MAX_AGE, GATEWAY_SHUTDOWN_SECONDS and others
    were read by the settings but missing from README's table."""
    documented = readme_env_names()
    missing = {
        module: sorted(names - documented)
        for module, names in settings_env_names().items()
        if names - documented
    }
    assert not missing, (
        "README.md's configuration table (## Configuration) has no row for these environment variables "
        "that the settings read; add a row for each (name, default, meaning): "
        + "; ".join(f"{module}: {', '.join(names)}" for module, names in missing.items())
    )


def test_a_removed_variable_refuses_to_start_by_name():
    """GATEWAY_PROVIDER_TRANSPORT chose httpx or aiohttp; httpx is gone, and the old setting must not be
    ignored silently."""
    result = _import_settings("gateway_site.settings.local", GATEWAY_PROVIDER_TRANSPORT="httpx")
    assert result.returncode != 0
    assert "GATEWAY_PROVIDER_TRANSPORT was removed" in result.stderr
    assert _import_settings("gateway_site.settings.local").returncode == 0
