"""OpenAPI document, offline Swagger UI, and a bounded, seeded schemathesis run (no 500s)."""

from __future__ import annotations

import pytest

from batches.selectors import result_from_row
from batches.submission import submit_batch
from tests.openapi_checks import (
    assert_operations_with_bearer_auth,
    keep_db_connection,  # noqa: F401 - fixture
    openapi_document,
    schemathesis_run,
)

from .helpers import item

pytestmark = pytest.mark.django_db

OPERATIONS = {
    ("/api/v1/batches", "get"),
    ("/api/v1/batches", "post"),
    ("/api/v1/batches/{batch_id}", "get"),
    ("/api/v1/batches/{batch_id}/results", "get"),
    ("/api/v1/batches/{batch_id}/comparison", "get"),
    ("/api/v1/batches/{batch_id}/cancel", "post"),
    ("/api/v1/batches/{batch_id}/retry_failed", "post"),
    ("/api/v1/usage", "get"),
}


@pytest.fixture
def document(anon):
    return openapi_document(anon)


def test_schema_documents_every_operation_with_bearer_auth(document):
    assert document["openapi"].startswith("3.")
    # /v1/ (the OpenAI-compatible surface) is checked in tests/openai/test_schema.py
    assert_operations_with_bearer_auth(document, "/api/", OPERATIONS)


def test_schema_documents_error_shapes(document):
    schemas = document["components"]["schemas"]
    post = document["paths"]["/api/v1/batches"]["post"]
    for code in ("400", "413", "415"):
        ref = post["responses"][code]["content"]["application/json"]["schema"]["$ref"]
        assert ref.endswith("/Errors")
    assert set(schemas["Errors"]["properties"]) == {"errors", "error_count"}
    assert set(schemas["FieldError"]["properties"]) == {"index", "field", "message", "line"}
    assert set(schemas["FieldError"]["required"]) == {"index", "field", "message"}  # line: JSONL only
    assert set(post["requestBody"]["content"]) == {"application/json", "application/jsonl"}
    for path in ("/api/v1/batches/{batch_id}", "/api/v1/batches/{batch_id}/results"):
        assert "404" in document["paths"][path]["get"]["responses"]
    results_params = {
        p["name"]: p for p in document["paths"]["/api/v1/batches/{batch_id}/results"]["get"]["parameters"]
    }
    assert "native" in results_params["include"]["description"]  # the native switch is documented


def test_schema_fields_match_what_the_api_returns(document, client, routes):
    schemas = document["components"]["schemas"]
    batch = client.post("/api/v1/batches", {"items": [item(0)]}, format="json").json()
    assert set(schemas["Batch"]["properties"]) == set(batch)
    assert set(schemas["Stats"]["properties"]) == set(batch["stats"])
    assert set(schemas["RequestCounts"]["properties"]) == set(batch["request_counts"])
    result = client.get(f"/api/v1/batches/{batch['id']}/results").json()["results"][0]
    # native_response is there only with ?include=native, steps only for an item of a batch with steps,
    # target only for an evaluation's copy, routed_by only for a moved item
    assert set(schemas["Result"]["properties"]) == set(result) | {
        "native_response",
        "steps",
        "target",
        "routed_by",
    }
    native = client.get(f"/api/v1/batches/{batch['id']}/results?include=native").json()["results"][0]
    assert set(schemas["Result"]["properties"]) == set(native) | {"steps", "target", "routed_by"}
    steps = {"step": "s", "steps": []}  # a pipeline item's record (batches.steps)
    row = (0, "c", "failed", "p", 1, 1, None, "timeout", None, "m", 1, 2, 3, 4, 5, "realtime", steps, "t", "q", "p", {"id": "m"})  # fmt: skip
    assert set(schemas["Result"]["properties"]) == set(result_from_row(row, native=True))
    assert set(schemas["ResultError"]["properties"]) == set(result_from_row(row, native=True)["error"])
    usage = result_from_row(row, native=True)["usage"]
    step = result_from_row(row, native=True)["steps"][0]
    assert set(schemas["StepResult"]["properties"]) == set(step)
    assert set(schemas["RoutedBy"]["properties"]) == set(result_from_row(row, native=True)["routed_by"])
    assert set(schemas["ResultUsage"]["properties"]) == set(usage)
    assert set(schemas["PromptTokensDetails"]["properties"]) == set(usage["prompt_tokens_details"])
    item_props = set(schemas["Item"]["properties"])
    assert item_props == {
        "custom_id",
        "route",
        "provider",
        "endpoint",
        "messages",
        "query",
        "input",
        "params",
    }
    usage = client.get("/api/v1/usage").json()
    assert set(schemas["Usage"]["properties"]) == set(usage)


def test_swagger_ui_is_served_offline(anon):
    response = anon.get("/api/docs/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "swagger-ui" in html
    assert "cdn.jsdelivr.net" not in html and "unpkg.com" not in html
    assert "/api/schema/" in html
    # the assets (from drf-spectacular-sidecar) are served by the app itself, even with DEBUG off
    for asset in ("swagger-ui.css", "swagger-ui-bundle.js", "swagger-ui-standalone-preset.js"):
        url = f"/api/docs/assets/{asset}"
        assert url in html
        served = anon.get(url)
        assert served.status_code == 200
        assert len(b"".join(served.streaming_content)) > 1000
    assert (
        anon.get("/api/docs/assets/../../../settings.py").status_code == 400
    )  # no traversal: the normalised path is refused


@pytest.mark.timeout(240)
def test_schemathesis_finds_no_server_errors(api_key, team, routes, keep_db_connection):  # noqa: F811
    batch = submit_batch(team=team, items=[item(i) for i in range(5)])
    seen, calls = schemathesis_run("^/api/", api_key[1], {"batch_id": str(batch.id)}, max_examples=300)
    assert 200 in seen and 400 in seen  # the run reached real handlers, not only auth errors
    assert len(calls) >= 250 and len(set(calls)) == len(OPERATIONS)
