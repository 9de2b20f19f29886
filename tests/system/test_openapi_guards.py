"""Guards derived from the OpenAPI document, so a new endpoint cannot slip past them.

The document and what is served are the same set of (path, method): every API view of the URL conf
and the interactive lane's paths (served by their own ASGI path, gateway_site.asgi_interactive,
documented by openai_api/interactive_schema.py) — a new endpoint fails until it is documented.
For every operation that /api/schema/ describes (it covers /api/v1/ and /v1/, the interactive lane too):
  * with a path id: another team's object answers 404 (never 200/403/409), and nothing changes;
  * GET: no provider secret (a database key or a GATEWAY_PROVIDER_SECRET_* value) is in the body,
    for the owner reading its own objects, after a batch ran against those providers.
A path parameter this file does not know fails the test: add the owner's object for it to IDS.
"""

from __future__ import annotations

import io
import json
import re

import pytest
from django.test import override_settings
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.test import APIClient

from batches.models import Batch
from gateway_site.asgi_routing import INTERACTIVE_PATHS
from openai_api.models import OpenAIBatch
from sim.testing import run_simulator_in_thread
from teams.services import create_api_key, create_team

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]

DB_SECRET = "sk-db-secret-7f3a9c1e5b"
ENV_SECRET = "sk-env-secret-2d8e4b6a0c"
SIM = {
    "time_scale": 1,
    "seed": 5,
    "providers": {
        "keyed": {"rpm": 100000, "tpm": 100000000, "median_ms": 2, "sigma": 0.1},
        "envkeyed": {"rpm": 100000, "tpm": 100000000, "median_ms": 2, "sigma": 0.1},
    },
}


def operations(schema: dict) -> list[tuple[str, str, list[str]]]:
    """(METHOD, path template, path parameter names) of every operation in the document."""
    ops = []
    for path, item in schema["paths"].items():
        for method, op in item.items():
            if method.lower() not in ("get", "post", "put", "patch", "delete"):
                continue
            names = [
                p["name"] for p in op.get("parameters", []) + item.get("parameters", []) if p["in"] == "path"
            ]
            ops.append((method.upper(), path, names))
    return ops


def fill(path: str, ids: dict[tuple[str, str], str]) -> str:
    """The path with every {param} replaced by the owner's object for (surface, param)."""
    surface = "native" if path.startswith("/api/") else "openai"

    def one(match: re.Match) -> str:
        key = (surface, match.group(1))
        assert key in ids, f"{path}: no object for path parameter {key}; add one to the scene in this test"
        return ids[key]

    return re.sub(r"\{(\w+)\}", one, path)


@pytest.fixture
def scene(make_provider, make_route, tmp_path, monkeypatch, redis_sync):
    """Team acme owns a finished native batch (an evaluation over both routes), an OpenAI-style file and
    batch; globex owns nothing."""
    monkeypatch.setenv("GATEWAY_PROVIDER_SECRET_ENVKEYED", ENV_SECRET)
    storages = {
        "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
        "openai_files": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(tmp_path / "files")},
        },
    }
    with override_settings(STORAGES=storages), run_simulator_in_thread(SIM) as sim:
        keyed = make_provider("keyed", base_url=sim.provider_url("keyed"), api_key=DB_SECRET, rpm=60000)
        envkeyed = make_provider("envkeyed", base_url=sim.provider_url("envkeyed"), rpm=60000)
        make_route("r1", keyed)
        make_route("r2", envkeyed)
        acme, globex = create_team("acme")[0], create_team("globex")[0]
        owner, stranger = APIClient(), APIClient()
        owner.credentials(HTTP_AUTHORIZATION=f"Bearer {create_api_key(acme, 'k')[1]}")
        stranger.credentials(HTTP_AUTHORIZATION=f"Bearer {create_api_key(globex, 'k')[1]}")

        # an evaluation (targets): every native batch operation, its comparison included, answers for it
        items = [{"custom_id": f"n{i}", "query": f"q {i}"} for i in range(4)]
        native = owner.post("/api/v1/batches", {"items": items, "targets": ["r1", "r2"]}, format="json")
        assert native.status_code == 201, native.content
        lines = [
            {
                "custom_id": f"o{i}",
                "method": "POST",
                "url": "/v1/chat/completions",
                "body": {"model": f"r{1 + i % 2}", "messages": [{"role": "user", "content": f"q {i}"}]},
            }
            for i in range(4)
        ]
        upload = io.BytesIO("".join(json.dumps(x) + "\n" for x in lines).encode())
        upload.name = "input.jsonl"
        file = owner.post("/v1/files", {"purpose": "batch", "file": upload}, format="multipart")
        assert file.status_code == 200, file.content
        ob = owner.post(
            "/v1/batches",
            {
                "input_file_id": file.json()["id"],
                "endpoint": "/v1/chat/completions",
                "completion_window": "24h",
            },
            format="json",
        )
        assert ob.status_code == 200, ob.content
        native_id, openai_id = native.json()["id"], ob.json()["id"]
        assert Batch.objects.get(pk=native_id).status == "completed"  # eager: the batch ran, results exist
        schema = owner.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
        assert schema.status_code == 200
        yield {
            "owner": owner,
            "stranger": stranger,
            "schema": json.loads(schema.content),
            "ids": {
                ("native", "batch_id"): native_id,
                ("openai", "batch_id"): openai_id,
                ("openai", "file_id"): file.json()["id"],
            },
        }


UNDOCUMENTED = {"/api/schema/", "/api/docs/", "/api/docs/assets/{path}"}  # the document and its page


def served_operations() -> set[tuple[str, str]]:
    """(METHOD, path template) of every API operation the site serves: the URL conf's views under /api/
    and /v1/ (a DRF view's methods, a plain view's from its ``Allow``-less method check below) and the
    interactive lane's paths, which gateway_site.asgi routes before the URL conf."""
    found: set[tuple[str, str]] = set()

    def walk(patterns, prefix: str) -> None:
        for pattern in patterns:
            route = prefix + str(pattern.pattern)
            if isinstance(pattern, URLResolver):
                walk(pattern.url_patterns, route)
                continue
            assert isinstance(pattern, URLPattern)
            path = "/" + re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", route)
            if not path.startswith(("/api/", "/v1/")) or path in UNDOCUMENTED or "(" in path:
                continue
            view = getattr(pattern.callback, "cls", None)
            if view is not None:
                for method in view.http_method_names:
                    if method not in ("options", "head", "trace") and hasattr(view, method):
                        found.add((method.upper(), path))
            else:  # a plain view: the interactive lane's (its own method check)
                assert path in INTERACTIVE_PATHS, f"{path}: a plain view under /api or /v1 is not documented"

    walk(get_resolver().url_patterns, "")
    found |= {("GET" if path == "/v1/models" else "POST", path) for path in INTERACTIVE_PATHS}
    return found


def test_the_document_lists_exactly_what_is_served(scene):
    documented = {(method, path) for method, path, _ in operations(scene["schema"])}
    served = served_operations()
    assert served - documented == set(), "served but not in /api/schema/"
    assert documented - served == set(), "in /api/schema/ but not served"
    chat = scene["schema"]["paths"]["/v1/chat/completions"]["post"]
    assert chat["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "ChatCompletionRequest"
    )
    assert set(chat["responses"]["200"]["content"]) == {"application/json", "text/event-stream"}
    models = scene["schema"]["paths"]["/v1/models"]["get"]
    assert models["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].endswith("ModelList")


def test_swagger_ui_shows_the_document(scene):
    page = scene["owner"].get("/api/docs/")
    assert page.status_code == 200 and b"/api/schema/" in page.content


def call(client: APIClient, method: str, url: str):
    body = {} if method != "GET" else None
    return getattr(client, method.lower())(url, body, format="json") if body is not None else client.get(url)


def test_the_document_covers_both_surfaces(scene):
    paths = {path for _, path, _ in operations(scene["schema"])}
    assert any(p.startswith("/api/v1/") for p in paths) and any(p.startswith("/v1/") for p in paths), paths
    assert sum(1 for _, _, names in operations(scene["schema"]) if names) >= 8


def test_every_operation_with_a_path_id_answers_404_to_another_team(scene):
    stranger, ids = scene["stranger"], scene["ids"]
    before = {(b.pk, b.status, b.completed_at) for b in Batch.objects.all()}
    checked = []
    for method, path, names in operations(scene["schema"]):
        if not names:
            continue
        url = fill(path, ids)
        response = call(stranger, method, url)
        assert response.status_code == 404, (method, url, response.status_code, response.content[:300])
        checked.append((method, path))
    assert len(checked) >= 8, checked
    # the owner's objects are untouched (nothing cancelled, retried or deleted by the other team)
    assert {(b.pk, b.status, b.completed_at) for b in Batch.objects.all()} == before
    assert scene["owner"].get(fill("/v1/files/{file_id}", ids)).status_code == 200
    assert OpenAIBatch.objects.count() == 1


def test_list_operations_show_another_team_nothing_of_the_owner(scene):
    stranger, ids = scene["stranger"], scene["ids"]
    for method, path, names in operations(scene["schema"]):
        if method != "GET" or names:
            continue
        response = stranger.get(path)
        assert response.status_code == 200, (path, response.status_code, response.content[:300])
        body = response.content.decode()
        for value in ids.values():
            assert value not in body, (path, value)


def test_no_get_operation_shows_a_provider_secret(scene):
    owner, ids = scene["owner"], scene["ids"]
    checked = 0
    for method, path, _ in operations(scene["schema"]):
        if method != "GET":
            continue
        url = fill(path, ids)
        response = owner.get(url)
        assert response.status_code == 200, (url, response.status_code, response.content[:300])
        body = b"".join(response.streaming_content) if response.streaming else response.content
        for secret in (DB_SECRET, ENV_SECRET):
            assert secret.encode() not in body, (url, secret)
        checked += 1
    assert checked >= 8
