"""Fixtures for the OpenAI-compatible surface: the files storage in a temp dir, the real openai SDK
pointed at Django's live server, input-file builders."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import warnings
from pathlib import Path

import openai
import pytest
from celery.exceptions import AlwaysEagerIgnored
from django.conf import settings
from django.db import connection

from batches.services import create_api_key
from tests.workers import test_queue


@pytest.fixture(autouse=True)
def files_root(tmp_path):
    """Every test stores its files under its own temp dir (override_settings resets the storages)."""
    from django.test import override_settings

    root = tmp_path / "files"
    storages = {
        **settings.STORAGES,
        "openai_files": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(root)},
        },
    }
    with override_settings(STORAGES=storages):
        yield root


@pytest.fixture
def sdk(live_server):
    """sdk(raw_key) → an openai.OpenAI client on this gateway's /v1 (no SDK retries: every call is seen)."""

    def make(raw_key: str) -> openai.OpenAI:
        return openai.OpenAI(base_url=live_server.url + "/v1", api_key=raw_key, max_retries=0, timeout=60)

    return make


@pytest.fixture
def client_for(sdk):
    """client_for(team) → an SDK client with a fresh key of that team."""

    def make(team) -> openai.OpenAI:
        return sdk(create_api_key(team, "sdk")[1])

    return make


def request_line(custom_id: str, model: str, content: str = "hi", **body) -> dict:
    return {
        "custom_id": custom_id,
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"model": model, "messages": [{"role": "user", "content": content}], **body},
    }


def jsonl(lines: list) -> io.BytesIO:
    data = "".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines).encode()
    buf = io.BytesIO(data)
    buf.name = "input.jsonl"
    return buf


def read_jsonl(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


ROOT = Path(__file__).resolve().parents[2]


def start_worker(queue: str, log_path: Path) -> subprocess.Popen:
    """A real `celery -A gateway_site worker` on this test's database, Redis key space and own queue."""
    db = connection.settings_dict
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "gateway_site.settings.test",
        "DATABASE_URL": f"postgres://{db['USER'] or 'postgres'}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/"
        f"{db['NAME']}",
        "REDIS_URL": settings.REDIS_URL,
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "GATEWAY_REDIS_PREFIX": settings.GATEWAY_REDIS_PREFIX,
        "CELERY_TASK_ALWAYS_EAGER": "0",
        "CELERY_TASK_DEFAULT_QUEUE": queue,
        "GATEWAY_CHUNK_SIZE": "100",
        "DJANGO_LOG_LEVEL": "WARNING",
    }
    cmd = [sys.executable, "-m", "celery", "-A", "gateway_site", "worker", "-P", "solo", "-Q", queue]
    cmd += [
        "-n",
        f"openai-{queue}@%h",
        "--without-gossip",
        "--without-mingle",
        "--without-heartbeat",
        "-l",
        "WARNING",
    ]
    return subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=open(log_path, "wb"), stderr=subprocess.STDOUT, start_new_session=True
    )


def stop_worker(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


@pytest.fixture
def celery_worker_queue(tmp_path, monkeypatch):
    """A real worker on a per-test queue; the web side (live server) hands new batches to that queue."""
    from batches import submission
    from gateway_site import celery_app

    queue = test_queue("openai")
    log_path = tmp_path / "worker.log"
    proc = start_worker(queue, log_path)

    def enqueue_start(batch_id: str) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", AlwaysEagerIgnored)
            celery_app.send_task("batches.start_batch", args=[batch_id], queue=queue)

    monkeypatch.setattr(submission, "enqueue_start", enqueue_start)
    try:
        yield log_path
    finally:
        stop_worker(proc)
        import redis

        client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
        client.delete(queue, f"_kombu.binding.{queue}")
        client.close()
