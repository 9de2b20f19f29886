"""Redis (the quota pool, the throttle, the broker) stopped mid-test: every ``/v1`` operation — chat
completions (plain and streamed), models, files, batches — answers 503 in OpenAI's error shape with
Retry-After, never a 500, and stores nothing. A real uvicorn (gateway_site.asgi) on this test's own
redis-server (tests.servers.start_redis; the shared one is never touched)."""

from __future__ import annotations

import json

import httpx
import pytest

from batches.models import Batch
from openai_api.models import File, OpenAIBatch
from teams.services import create_api_key
from tests.servers import start_redis

from .conftest import settled, start_uvicorn, stop
from .test_sdk import KINDS

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]


@pytest.fixture
def gateway_on_own_redis(tmp_path):
    redis = start_redis(tmp_path)
    proc, url = start_uvicorn(tmp_path / "uvicorn.log", REDIS_URL=redis.url, CELERY_BROKER_URL=redis.url,
                              CELERY_TASK_ALWAYS_EAGER="0")  # fmt: skip
    yield url, redis
    stop(proc)
    redis.stop()


def test_every_v1_operation_answers_503_in_openai_shape_when_redis_is_down(
    sim_server, make_provider, make_route, team, gateway_on_own_redis
):
    url, redis = gateway_on_own_redis
    sim = sim_server({"time_scale": 1, "providers": {"gpt": KINDS["gpt"]}})
    make_route("chat", make_provider("gpt", base_url=sim.provider_url("gpt"), model="gpt-sim", rpm=6000))
    headers = {"Authorization": f"Bearer {create_api_key(team, 'k')[1]}"}
    settled()
    chat = {"model": "chat", "messages": [{"role": "user", "content": "x"}], "max_tokens": 5}
    http = httpx.Client(base_url=url, headers=headers, timeout=30)
    assert http.post("/v1/chat/completions", json=chat).status_code == 200  # Redis up: served
    line = {"custom_id": "a", "method": "POST", "url": "/v1/chat/completions", "body": chat}
    upload = http.post("/v1/files", data={"purpose": "batch"},
                       files={"file": ("in.jsonl", json.dumps(line).encode() + b"\n")})  # fmt: skip
    assert upload.status_code == 200, upload.text
    file_id = upload.json()["id"]
    redis.stop()
    before = (Batch.objects.count(), OpenAIBatch.objects.count(), File.objects.count())
    calls = [
        ("POST", "/v1/chat/completions", {"json": chat}),
        ("POST", "/v1/chat/completions", {"json": {**chat, "stream": True}}),
        ("GET", "/v1/models", {}),
        ("GET", "/v1/files", {}),
        ("POST", "/v1/files", {"data": {"purpose": "batch"}, "files": {"file": ("b.jsonl", b"{}\n")}}),
        ("GET", f"/v1/files/{file_id}", {}),
        ("GET", "/v1/batches", {}),
        ("POST", "/v1/batches", {"json": {"input_file_id": file_id, "endpoint": "/v1/chat/completions",
                                          "completion_window": "24h"}}),
    ]  # fmt: skip
    for method, path, kw in calls:
        answer = http.request(method, path, **kw)
        assert answer.status_code == 503, (method, path, answer.status_code, answer.text[:300])
        assert answer.headers["content-type"].startswith("application/json"), (method, path)
        error = answer.json()["error"]
        assert set(error) == {"message", "type", "param", "code"} and error["message"], (method, path, error)
        assert int(answer.headers["Retry-After"]) >= 1, (method, path)
    assert (Batch.objects.count(), OpenAIBatch.objects.count(), File.objects.count()) == before
    http.close()
