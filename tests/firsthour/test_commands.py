"""Management commands on a missing, unmigrated or unreachable database: one sentence, no traceback,
and no empty SQLite file left behind."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.servers import free_port

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = [
    ["create_team", "acme"],
    ["create_api_key", "--team", "acme", "--name", "ci"],
    ["load_providers", "examples/providers.json"],
    ["submit_batch", "examples/batch.jsonl", "--team", "acme"],
]


def run(args: list[str], database_url: str | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE")}
    if database_url is not None:
        env["DATABASE_URL"] = database_url
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )


def _one_sentence(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 1, result
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("CommandError: "), result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


@pytest.mark.parametrize("args", COMMANDS, ids=[c[0] for c in COMMANDS])
def test_missing_sqlite_database_says_run_migrate_and_creates_no_file(tmp_path, args):
    db = tmp_path / "gateway.sqlite3"
    line = _one_sentence(run(args, f"sqlite:///{db}"))
    assert str(db) in line and "run `python manage.py migrate` first" in line
    assert not db.exists()


def test_default_database_is_named_when_database_url_is_unset(tmp_path):
    if (ROOT / "db.sqlite3").exists():
        pytest.skip("this checkout has a db.sqlite3")
    line = _one_sentence(run(["create_team", "acme"], None))
    assert "DATABASE_URL is unset" in line and "db.sqlite3" in line
    assert not (ROOT / "db.sqlite3").exists()


def test_unmigrated_database_names_the_missing_migrations(tmp_path):
    db = tmp_path / "other.sqlite3"
    sqlite3.connect(db).execute("CREATE TABLE unrelated (x)").connection.close()
    line = _one_sentence(run(["create_api_key", "--team", "acme"], f"sqlite:///{db}"))
    assert "is not migrated" in line and "run `python manage.py migrate` first" in line


def test_unreachable_postgres_is_one_sentence_without_the_password():
    port = free_port()  # nothing listens there
    line = _one_sentence(run(["create_team", "acme"], f"postgres://postgres:s3cret@127.0.0.1:{port}/gateway"))
    assert f"postgresql://postgres@127.0.0.1:{port}/gateway" in line and "s3cret" not in line


def test_a_migrated_database_works_as_before(tmp_path, migrated_sqlite):
    url = f"sqlite:///{migrated_sqlite(tmp_path / 'ok.sqlite3')}"  # after `manage.py migrate` (conftest.py)
    created = run(["create_team", "acme"], url)
    assert created.returncode == 0 and "created: team acme" in created.stdout
    key = run(["create_api_key", "--team", "acme", "--name", "ci"], url)
    assert key.returncode == 0 and key.stdout.strip().splitlines()[-1].startswith("bgw_")


def test_submit_batch_wait_without_a_terminal_prints_plain_lines(tmp_path, migrated_sqlite):
    """--wait piped to a log: no carriage returns, one line per status change or every few seconds."""
    url = f"sqlite:///{migrated_sqlite(tmp_path / 'wait.sqlite3')}"
    assert run(["create_team", "acme"], url).returncode == 0
    # a provider nothing listens on: every item fails fast with a connection error, the batch ends
    port = free_port()
    providers = tmp_path / "providers.json"
    provider = {"name": "p", "base_url": f"http://127.0.0.1:{port}/v1", "model": "m", "rpm": 600}
    provider.update(tpm=1_000_000, max_concurrency=4, max_retries=0)
    providers.write_text(json.dumps({"providers": [provider], "routes": []}))
    assert run(["load_providers", str(providers)], url).returncode == 0
    batch = tmp_path / "b.jsonl"
    batch.write_text("".join(f'{{"custom_id": "c{i}", "provider": "p", "query": "q"}}\n' for i in range(5)))
    result = run(["submit_batch", str(batch), "--team", "acme", "--wait", "--poll", "0.05"], url)
    assert "\r" not in result.stderr, result.stderr[-500:]
    progress = [line for line in result.stderr.splitlines() if "items finished" in line]
    assert progress and progress[-1].startswith("failed: 5/5 items finished"), result.stderr[-1000:]
    assert len(progress) <= 4  # queued/running/failed (+ at most one periodic line)
