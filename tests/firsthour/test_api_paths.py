"""Every unknown or malformed path under /api/ and /v1/ answers JSON; a trailing slash is the same endpoint."""

from __future__ import annotations

import json

import pytest
from rest_framework.test import APIClient

from batches.models import Batch, BatchItem

pytestmark = pytest.mark.django_db

ITEMS = [{"custom_id": "a", "route": "intent", "query": "hi"}]


def _json(response):
    assert response["Content-Type"].startswith("application/json"), (
        response.status_code,
        response.content[:200],
    )
    return json.loads(response.content)


@pytest.mark.parametrize(
    "path",
    [
        "/api",
        "/api/",
        "/api/nope",
        "/api/v1",
        "/api/v1/",
        "/api/v2/batches",
        "/api/v1/batchez",
        "/api/v1/batches/x/y/z",
        "/api/v1/usage/extra",
    ],
)
def test_unknown_api_paths_answer_native_json_404(client, path):
    for method in ("get", "post", "delete"):
        response = getattr(client, method)(path)
        assert response.status_code == 404, (method, path)
        body = _json(response)
        assert set(body) == {"detail"} and path in body["detail"]


@pytest.mark.parametrize("path", ["/v1", "/v1/", "/v1/nope", "/v1/chat/nothing-here", "/v1/batches/x/y/z"])
def test_unknown_v1_paths_answer_openai_error_shape(anon, path):
    response = anon.post(path, {"a": 1}, format="json")
    assert response.status_code == 404
    body = _json(response)
    assert set(body) == {"error"}
    assert set(body["error"]) == {"message", "type", "param", "code"}
    assert body["error"]["type"] == "invalid_request_error" and path in body["error"]["message"]


@pytest.mark.parametrize(
    "suffix",
    [
        "not-a-uuid",
        "not-a-uuid/results",
        "not-a-uuid/cancel",
        "123/retry_failed",
        "3f2b8c1e-9d4a-4e6b-8a71-5c0d2e9f4b13",
    ],
)
def test_malformed_or_unknown_batch_id_is_json_batch_not_found(client, suffix):
    method = client.post if suffix.endswith(("cancel", "retry_failed")) else client.get
    response = method(f"/api/v1/batches/{suffix}")
    assert response.status_code == 404
    assert _json(response) == {"detail": "batch not found"}


def test_malformed_batch_id_without_a_key_is_401_not_html(anon):
    response = anon.get("/api/v1/batches/not-a-uuid")
    assert response.status_code == 401 and "detail" in _json(response)


def test_trailing_slash_post_creates_the_batch_like_the_canonical_path(client, routes):
    for path in ("/api/v1/batches/", "/api/v1/batches"):
        response = client.post(path, {"items": ITEMS}, format="json")
        assert response.status_code == 201, (path, response.content)
    assert Batch.objects.count() == 2 and BatchItem.objects.count() == 2
    # invalid input through the slash form: the same 400 errors shape, nothing stored
    bad = client.post("/api/v1/batches/", {"items": [{"custom_id": "a"}]}, format="json")
    assert bad.status_code == 400 and bad.json()["errors"][0]["index"] == 0
    assert Batch.objects.count() == 2


def test_trailing_slash_forms_answer_exactly_like_the_canonical_paths(client, routes):
    created = client.post("/api/v1/batches", {"items": ITEMS}, format="json").json()
    batch = f"/api/v1/batches/{created['id']}"
    for path in ("/api/v1/batches", batch, f"{batch}/results", "/api/v1/usage"):
        canonical, slashed = client.get(path), client.get(path + "/")
        assert slashed.status_code == canonical.status_code == 200, path
        assert _json(slashed).keys() == _json(canonical).keys(), path
    assert client.get(f"{batch}/results/").json()["results"][0]["custom_id"] == "a"
    assert client.get("/api/v1/batches/", {"status": "nope"}).status_code == 400
    cancelled = client.post(f"{batch}/cancel/")
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"


def test_schema_without_its_slash_is_served_not_a_404(anon):
    response = anon.get("/api/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200 and "paths" in json.loads(response.content)


def test_favicon_is_served(anon):
    response = anon.get("/favicon.ico")
    assert response.status_code == 200 and response["Content-Type"] == "image/svg+xml"
    assert b"<svg" in response.content


def test_html_404_stays_html_outside_the_api(anon):
    response = anon.get("/no-such-page")
    assert response.status_code == 404 and not response["Content-Type"].startswith("application/json")


def test_server_error_under_api_is_json(api_key, monkeypatch):
    from batches.api import views

    def explode(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(views.selectors, "usage_for_team", explode)
    client = APIClient(raise_request_exception=False)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key[1]}")
    response = client.get("/api/v1/usage")
    assert response.status_code == 500
    body = _json(response)
    assert set(body) == {"detail"} and "boom" not in body["detail"]


def test_openai_surface_trailing_slash_and_unknown_paths(client):
    """/v1/ (the OpenAI-compatible app): the slash twin is served by its view, the rest is OpenAI's 404."""
    canonical, slashed = client.get("/v1/batches"), client.get("/v1/batches/")
    assert canonical.status_code == slashed.status_code == 200
    assert _json(slashed).keys() == _json(canonical).keys()
    assert client.get("/v1/files/").status_code == client.get("/v1/files").status_code == 200
    unknown = client.get("/v1/batches/batch_x/y/z")
    assert unknown.status_code == 404 and _json(unknown)["error"]["type"] == "invalid_request_error"
    missing = client.get("/v1/batches/batch_does_not_exist/")  # the app's own 404, through the twin
    assert missing.status_code == 404 and set(_json(missing)) == {"error"}
