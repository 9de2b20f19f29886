"""/v1/ in the OpenAPI document (/api/schema/): every operation with bearer auth and OpenAI-shaped
errors, field sets equal to what the API returns, and a bounded seeded schemathesis run (no 500s,
responses conform to the documented schema)."""

from __future__ import annotations

import json

import pytest
from rest_framework.test import APIClient

from openai_api.files import upload_file
from tests.openapi_checks import (
    assert_operations_with_bearer_auth,
    keep_db_connection,  # noqa: F401 - fixture
    openapi_document,
    schemathesis_run,
)

from .conftest import request_line

pytestmark = pytest.mark.django_db

OPERATIONS = {
    ("/v1/files", "get"),
    ("/v1/files", "post"),
    ("/v1/files/{file_id}", "get"),
    ("/v1/files/{file_id}", "delete"),
    ("/v1/files/{file_id}/content", "get"),
    ("/v1/batches", "get"),
    ("/v1/batches", "post"),
    ("/v1/batches/{batch_id}", "get"),
    ("/v1/batches/{batch_id}/cancel", "post"),
}
# served by the interactive lane's ASGI path, documented by openai_api/interactive_schema.py
INTERACTIVE = {
    ("/v1/chat/completions", "post"),
    ("/v1/models", "get"),
    ("/v1/responses", "post"),
    ("/v1/embeddings", "post"),
}
ANTHROPIC = {("/v1/messages", "post")}  # the anthropic SDK's surface: Anthropic's error shape


@pytest.fixture
def document():
    return openapi_document()


@pytest.fixture
def client(api_key):
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key[1]}")
    return c


def upload(client, lines) -> dict:
    from django.core.files.uploadedfile import SimpleUploadedFile

    data = "".join(json.dumps(x) + "\n" for x in lines).encode()
    response = client.post(
        "/v1/files", {"file": SimpleUploadedFile("in.jsonl", data), "purpose": "batch"}, format="multipart"
    )
    assert response.status_code == 200, response.content
    return response.json()


def test_every_v1_operation_is_documented_with_bearer_auth_and_openai_errors(document):
    assert_operations_with_bearer_auth(document, "/v1/", OPERATIONS | INTERACTIVE | ANTHROPIC)
    schemas = document["components"]["schemas"]
    for path, method in OPERATIONS | INTERACTIVE | ANTHROPIC:
        operation = document["paths"][path][method]
        for code in ("401", "429"):
            ref = operation["responses"][code]["content"]["application/json"]["schema"]["$ref"]
            assert ref.endswith("/AnthropicError" if (path, method) in ANTHROPIC else "/OpenAIError"), (
                path,
                code,
            )
    assert set(schemas["OpenAIErrorDetail"]["properties"]) == {"message", "type", "param", "code"}
    upload_body = document["paths"]["/v1/files"]["post"]["requestBody"]["content"]
    assert set(upload_body) == {"multipart/form-data"}


def test_schema_fields_match_what_the_api_returns(document, client, team, make_provider, make_route):
    schemas = document["components"]["schemas"]
    make_route("chat", make_provider("alpha"))
    file = upload(client, [request_line("a", "chat"), {"custom_id": "b"}])
    assert set(schemas["OpenAIFileObject"]["properties"]) == set(file)
    batch = client.post(
        "/v1/batches",
        {"input_file_id": file["id"], "endpoint": "/v1/chat/completions", "completion_window": "24h"},
        format="json",
    ).json()
    assert batch["status"] == "failed"  # line 2 is invalid
    assert set(schemas["OpenAIBatch"]["properties"]) == set(batch)
    assert set(schemas["OpenAIBatchErrors"]["properties"]) == set(batch["errors"])
    assert set(schemas["OpenAIBatchError"]["properties"]) == set(batch["errors"]["data"][0])
    assert set(schemas["OpenAIBatchUsage"]["properties"]) == set(batch["usage"])
    assert set(schemas["OpenAIBatchList"]["properties"]) == set(client.get("/v1/batches").json())
    assert set(schemas["OpenAIFileList"]["properties"]) == set(client.get("/v1/files").json())
    deleted = client.delete(f"/v1/files/{file['id']}").json()
    assert set(schemas["OpenAIFileDeleted"]["properties"]) == set(deleted)


@pytest.mark.timeout(240)
def test_schemathesis_finds_no_server_errors_on_v1(
    team,
    api_key,
    make_provider,
    make_route,
    keep_db_connection,  # noqa: F811
):
    from django.core.files.uploadedfile import SimpleUploadedFile

    make_route("chat", make_provider("alpha"))
    # through the service: a django.test client request would reconnect close_old_connections
    data = (json.dumps(request_line("a", "chat", max_tokens=2)) + "\n").encode()
    file_id = upload_file(team=team, upload=SimpleUploadedFile("in.jsonl", data), purpose="batch").id
    # files and batches (the interactive lane answers 503 asgi_required under WSGI: tests/interactive/)
    seen, calls = schemathesis_run("^/v1/(files|batches)", api_key[1], {"file_id": file_id}, max_examples=200)
    assert 200 in seen and 400 in seen and 404 in seen
    assert len(set(calls)) == len(OPERATIONS)
