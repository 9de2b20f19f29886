"""Single-process mode only where it is safe (issue #28): with a PostgreSQL DATABASE_URL and no
REDIS_URL, every command and the web app refuse to start, in one sentence naming REDIS_URL, unless
GATEWAY_SINGLE_PROCESS=1 says that this process is meant to be the whole system.

Before the fix a forgotten REDIS_URL next to the production database ran `submit_batch --wait`'s batch
inside the command with an in-process quota store while the workers sat idle (the per-process limiter
the README promises never happens); `migrate`, `check` and `runserver` started as if all was well."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.servers import free_port
from tests.workers import ROOT, database_url

pytestmark = pytest.mark.django_db

COMMANDS = {
    "check": ["check"],
    "migrate": ["migrate", "--noinput"],
    "runserver": ["runserver", "--noreload", "PORT"],
    "submit_batch": ["submit_batch", "examples/batch.jsonl", "--team", "acme", "--wait"],
    "create_team": ["create_team", "acme"],
}


def shell_env(**extra: str) -> dict[str, str]:
    """An operator's shell with DATABASE_URL pointing at PostgreSQL (this run's database) and no REDIS_URL."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DJANGO_", "REDIS_URL", "DATABASE_URL", "CELERY_", "GATEWAY_", "PROMETHEUS_"))
    }
    env.update(DATABASE_URL=database_url(), **extra)
    return env


def run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    args = [str(free_port()) if a == "PORT" else a for a in args]
    return subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)


def refused_in_one_sentence(result: subprocess.CompletedProcess) -> str:
    assert result.returncode != 0, result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert "REDIS_URL is not set" in lines[0] and "GATEWAY_SINGLE_PROCESS=1" in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_command_refuses_postgresql_without_redis(name):
    line = refused_in_one_sentence(run([sys.executable, "manage.py", *COMMANDS[name]], shell_env()))
    assert line.startswith("ImproperlyConfigured: ") and "postgresql" in line


@pytest.mark.parametrize(
    "settings_module", ["gateway_site.settings.local", "gateway_site.settings.production"]
)
def test_the_web_app_refuses_postgresql_without_redis(settings_module):
    env = shell_env(
        DJANGO_SETTINGS_MODULE=settings_module,
        DJANGO_SECRET_KEY="Zq8v3Lr0xKp2WmYt5NbJ7cHs9DgEaFu1-_4Qo6Ri",
        GATEWAY_METRICS_TOKEN="Hn4c-Wq9Tz2Lp7Rv5Xk8Bs3Dy6Fm1Jg",
    )
    result = run([sys.executable, "-c", "import gateway_site.wsgi"], env)
    assert result.returncode != 0
    assert "REDIS_URL is not set" in result.stderr.strip().splitlines()[-1], result.stderr


def test_gateway_single_process_1_allows_it_explicitly():
    result = run([sys.executable, "manage.py", "check"], shell_env(GATEWAY_SINGLE_PROCESS="1"))
    assert result.returncode == 0, result.stderr


def test_a_command_error_that_is_not_the_settings_keeps_its_message():
    """The one-sentence path is only for settings that refuse to load: other errors are unchanged."""
    result = run([sys.executable, "manage.py", "no_such_command"], shell_env(GATEWAY_SINGLE_PROCESS="1"))
    assert result.returncode == 1 and "Unknown command: 'no_such_command'" in result.stderr
