"""The client's own HTTP policy, on an httpx.MockTransport (no server): which calls are retried and
when, the Idempotency-Key of a retried submission, the typed errors built from the gateway's error
bodies, the stream parser, the progress line without tqdm, and the version."""

from __future__ import annotations

import ast
import io
import json
import sys
import tomllib
from importlib import metadata

import httpx
import pytest
from batch_gateway_client import (
    APIConnectionError,
    APITimeoutError,
    BadRequestError,
    BatchWaitTimeout,
    ConflictError,
    Gateway,
    InternalServerError,
    RateLimitError,
    ServiceUnavailableError,
    StreamError,
    __version__,
)
from batch_gateway_client._progress import Progress

from .conftest import CLIENT_DIR, ROOT

BATCH = {"id": "b1", "status": "queued", "request_counts": {"total": 1, "completed": 0, "failed": 0}}


class Script:
    """A transport answering from a list: each entry a Response, or an exception to raise."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def gateway(self, **kw) -> Gateway:
        return Gateway("http://gw.test", "bgw_k", transport=httpx.MockTransport(self), **kw)


def reply(status: int, body=None, **headers) -> httpx.Response:
    return httpx.Response(status, json=body if body is not None else {}, headers=headers)


def test_gets_are_retried_after_transport_errors_and_5xx():
    script = Script(httpx.ReadTimeout("slow"), reply(502), reply(503, {"detail": "x"}, **{"Retry-After": "0"}),
                    reply(200, BATCH))  # fmt: skip
    assert script.gateway(retries=3).retrieve("b1") == BATCH
    assert len(script.requests) == 4
    script = Script(reply(502), reply(502))
    with pytest.raises(InternalServerError) as caught:
        script.gateway(retries=1).retrieve("b1")
    assert caught.value.status_code == 502 and len(script.requests) == 2  # retries is the bound
    with pytest.raises(APITimeoutError):
        Script(httpx.ReadTimeout("slow")).gateway(retries=0).retrieve("b1")


def test_a_submission_is_resent_after_a_lost_answer_only_with_its_idempotency_key():
    script = Script(httpx.ReadTimeout("answer lost"), reply(201, BATCH))
    assert script.gateway().submit([{"route": "r", "query": "q"}]) == BATCH
    first, second = script.requests
    assert first.headers["Idempotency-Key"] == second.headers["Idempotency-Key"]
    assert first.headers["Idempotency-Key"].startswith("bgwc-")
    assert first.content == second.content  # the same bytes: the gateway hashes them with the key
    assert json.loads(first.content)["items"] == [{"route": "r", "query": "q", "custom_id": "0"}]
    # one key per call
    script = Script(reply(201, BATCH), reply(201, BATCH))
    gw = script.gateway()
    gw.submit([{"custom_id": "a", "route": "r", "query": "q"}])
    gw.submit([{"custom_id": "a", "route": "r", "query": "q"}])
    assert script.requests[0].headers["Idempotency-Key"] != script.requests[1].headers["Idempotency-Key"]
    # without a key the POST that went out is never sent again
    script = Script(httpx.ReadTimeout("answer lost"), reply(201, BATCH))
    with pytest.raises(APITimeoutError):
        script.gateway().submit([{"route": "r", "query": "q"}], idempotency_key=False)
    assert len(script.requests) == 1 and "Idempotency-Key" not in script.requests[0].headers
    # ...but one that could not connect was not sent at all
    script = Script(httpx.ConnectError("refused"), reply(201, BATCH))
    assert script.gateway().submit([{"route": "r", "query": "q"}], idempotency_key=False) == BATCH
    script = Script(reply(201, BATCH))
    script.gateway().submit(
        [{"route": "r", "query": "q"}], idempotency_key="order-1", priority="low", cache=None
    )
    assert script.requests[0].headers["Idempotency-Key"] == "order-1"
    assert set(json.loads(script.requests[0].content)) == {"items", "priority"}  # None options unsent


def test_429_and_503_with_retry_after_are_waited_out_for_any_call_but_not_a_spent_budget():
    limits = {
        "errors": [{"index": None, "field": "limits.open_batches", "message": "500 open"}],
        "error_count": 1,
    }
    script = Script(reply(429, limits, **{"Retry-After": "0"}), reply(201, BATCH))
    assert script.gateway().submit([{"route": "r", "query": "q"}], idempotency_key=False) == BATCH
    budget = {"errors": [{"index": None, "field": "budget", "message": "over"}], "error_count": 1,
              "budget": {"period": "day", "limit": 10, "used": 10, "remaining": 0}}  # fmt: skip
    script = Script(reply(429, budget))
    with pytest.raises(RateLimitError) as caught:
        script.gateway().submit([{"route": "r", "query": "q"}])
    assert caught.value.fields == ["budget"] and caught.value.budget["remaining"] == 0
    assert caught.value.retry_after is None and len(script.requests) == 1
    quota = {"error": {"message": "budget used up", "type": "insufficient_quota", "param": None,
                       "code": "budget_exceeded"}}  # fmt: skip
    script = Script(reply(429, quota, **{"x-should-retry": "false", "Retry-After": "0"}))
    with pytest.raises(RateLimitError) as caught:
        script.gateway().chat("m", "hi")
    assert caught.value.code == "budget_exceeded" and len(script.requests) == 1
    # a wait longer than max_retry_after is raised, carrying it
    script = Script(
        reply(503, {"detail": "redis is unavailable", "dependency": "redis"}, **{"Retry-After": "5"})
    )
    with pytest.raises(ServiceUnavailableError) as caught:
        script.gateway(max_retry_after=1).retrieve("b1")
    assert caught.value.retry_after == 5 and caught.value.dependency == "redis"


def test_a_chat_call_is_not_sent_twice_once_it_went_out():
    script = Script(httpx.ReadTimeout("slow"), reply(200, {}))
    with pytest.raises(APITimeoutError):
        script.gateway().chat("m", "hi")
    assert len(script.requests) == 1
    timeout = {"error": {"message": "waited", "type": "rate_limit_error", "param": None,
                         "code": "gateway_queue_timeout"}}  # fmt: skip
    script = Script(reply(429, timeout, **{"Retry-After": "0"}), reply(200, {"object": "chat.completion"}))
    assert script.gateway().chat("m", "hi", max_wait=2.5, temperature=0)["object"] == "chat.completion"
    sent = script.requests[1]
    assert sent.headers["X-Gateway-Max-Wait"] == "2.5"
    assert json.loads(sent.content) == {"model": "m", "messages": [{"role": "user", "content": "hi"}],
                                        "temperature": 0}  # fmt: skip


def test_errors_carry_the_fields_the_api_named():
    body = {"errors": [{"index": 3, "field": "messages[0].role", "message": "must be one of system, user"},
                       {"index": None, "field": "metadata", "message": "must be an object"}],
            "error_count": 120}  # fmt: skip
    with pytest.raises(BadRequestError) as caught:
        Script(reply(400, body)).gateway().submit([])
    error = caught.value
    assert error.fields == ["messages[0].role", "metadata"] and error.error_count == 120
    assert error.errors[0].index == 3
    assert "item 3: messages[0].role: must be one of system, user" in str(error) and "118 more" in str(error)
    with pytest.raises(ConflictError):
        Script(
            reply(409, {"errors": [{"index": None, "field": "Idempotency-Key", "message": "used"}]})
        ).gateway().submit([])
    with pytest.raises(BadRequestError) as caught:
        Script(
            reply(413, {"errors": [{"index": None, "field": "body", "message": "too large"}]})
        ).gateway().submit([])
    assert caught.value.status_code == 413 and caught.value.fields == ["body"]


def sse(*events: str) -> httpx.Response:
    return httpx.Response(200, content="".join(f"data: {e}\n\n" for e in events).encode(),
                          headers={"content-type": "text/event-stream", "x-gateway-provider": "p"})  # fmt: skip


def test_the_chat_stream_ends_at_done_and_raises_an_error_event():
    chunk = json.dumps({"choices": [{"index": 0, "delta": {"content": "hi"}}]})
    stream = Script(sse(chunk, chunk, "[DONE]")).gateway().chat("m", "x", stream=True)
    assert stream.provider == "p" and len(list(stream)) == 2
    error = json.dumps({"error": {"message": "cut", "type": "server_error", "code": "connection_error"}})
    with pytest.raises(StreamError) as caught:
        list(Script(sse(chunk, error)).gateway().chat("m", "x", stream=True))
    assert caught.value.code == "connection_error"
    with pytest.raises(APIConnectionError):
        list(Script(sse(chunk)).gateway().chat("m", "x", stream=True))


def test_wait_timeout_leaves_the_batch_running_and_says_which():
    running = {**BATCH, "status": "running", "completed_at": None}
    script = Script(*[reply(200, running)] * 50)
    with pytest.raises(BatchWaitTimeout) as caught:
        script.gateway().wait("b1", wait_timeout=0.3)
    assert caught.value.batch["id"] == "b1"
    assert not any(r.method == "POST" for r in script.requests)


def test_the_plain_progress_line_without_tqdm():
    out = io.StringIO()
    bar = Progress(True, stream=out)
    bar._tqdm = None  # as where tqdm is not installed
    bar.update({"id": "abcdef123456", "status": "running", "request_counts": {"total": 10, "completed": 3,
                "failed": 1}})  # fmt: skip
    bar.update({"id": "abcdef123456", "status": "completed", "request_counts": {"total": 10, "completed": 9,
                "failed": 1}})  # fmt: skip
    bar.close()
    assert out.getvalue().splitlines() == ["batch abcdef12 running: 4/10 done, 1 not ok",
                                           "batch abcdef12 completed: 10/10 done, 1 not ok"]  # fmt: skip


def test_the_client_is_versioned_with_the_gateway():
    gateway = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert __version__ == gateway == metadata.version("batch-gateway-client")
    client = tomllib.loads((CLIENT_DIR / "pyproject.toml").read_text())["project"]
    assert client["dependencies"] == ["httpx>=0.25,<1"]  # httpx is the one required dependency
    assert Gateway("http://h:1/api/v1/", "k").base_url == "http://h:1"


def test_the_client_imports_only_httpx_langchain_core_tqdm_and_the_standard_library():
    allowed = {"httpx", "langchain_core", "tqdm", "batch_gateway_client"}
    found = set()
    for path in sorted((CLIENT_DIR / "batch_gateway_client").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    assert found - set(sys.stdlib_module_names) - {"__future__"} <= allowed, found
