"""Fixtures for the OpenAI-compatible surface: the files storage (the default: the database), the real openai SDK
pointed at Django's live server, input-file builders."""

from __future__ import annotations

import io
import json

import openai
import pytest

from teams.services import create_api_key
from tests.workers import delete_queue, send_start_batch, start_worker, stop_worker, test_queue


@pytest.fixture
def files_root():
    """The /v1 files storage as these tests see it: the default, blobs in the database
    (openai_api/blob_storage.py; each test's transaction or flush removes them)."""
    from openai_api.files import file_storage

    return file_storage()


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


@pytest.fixture
def celery_worker_queue(tmp_path, monkeypatch):
    """A real worker on a per-test queue; the web side (live server) hands new batches to that queue."""
    from batches import submission

    queue = test_queue("openai")
    log_path = tmp_path / "worker.log"
    proc = start_worker("openai", queue, log_path, GATEWAY_CHUNK_SIZE="100")
    monkeypatch.setattr(
        submission.enqueue, "enqueue_start", lambda batch_id: send_start_batch(batch_id, queue)
    )
    try:
        yield log_path
    finally:
        stop_worker(proc)
        delete_queue(queue)
