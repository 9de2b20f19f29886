"""The checks both API surfaces run on /api/schema/: which operations it documents, with what auth, and a
bounded, seeded schemathesis run (no 500s, status codes and bodies as documented).

Used by tests/api/test_schema.py (/api/v1/) and tests/openai/test_schema.py (/v1/).
"""

from __future__ import annotations

import pytest
import schemathesis
from django.core import signals
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from rest_framework.test import APIClient
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance, status_code_conformance

# JSONL bodies are text; let schemathesis send generated strings for that media type.
schemathesis.serializer.alias("application/jsonl", "text/plain")


def openapi_document(client: APIClient | None = None) -> dict:
    """/api/schema/ as JSON (anonymous: the document itself needs no key)."""
    response = (client or APIClient()).get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    return response.json()


def assert_operations_with_bearer_auth(document: dict, prefix: str, expected: set[tuple[str, str]]) -> None:
    """The document lists exactly `expected` (path, method) under `prefix`, each behind the bearer key
    and documenting its 401 and 429 answers."""
    found = {
        (path, method) for path, ops in document["paths"].items() for method in ops if path.startswith(prefix)
    }
    assert found == expected
    scheme = document["components"]["securitySchemes"]["ApiKeyAuth"]
    assert scheme["type"] == "http" and scheme["scheme"] == "bearer"
    for path, method in expected:
        operation = document["paths"][path][method]
        assert operation["security"] == [{"ApiKeyAuth": []}], (path, method)
        assert "401" in operation["responses"] and "429" in operation["responses"], (path, method)


@pytest.fixture
def keep_db_connection():
    """Calling the raw WSGI app fires request_started/finished, whose handler would close the test
    transaction's connection; django.test.Client disconnects it the same way."""
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


def schemathesis_run(
    path_regex: str, raw_key: str, path_parameters: dict[str, str], max_examples: int
) -> tuple[set[int], list[str]]:
    """A seeded schemathesis run over the operations matching `path_regex` (generated cases, and the
    same with `path_parameters` set to real objects), each call checked for no 5xx and for status
    code and body conforming to the document. Needs the `keep_db_connection` fixture.
    Returns (status codes seen, operation label per call)."""
    schema = schemathesis.openapi.from_wsgi("/api/schema/", get_wsgi_application()).include(
        path_regex=path_regex
    )
    strategy = st.one_of(schema.as_strategy(), schema.as_strategy(path_parameters=path_parameters))
    seen: set[int] = set()
    calls: list[str] = []

    @settings(
        max_examples=max_examples,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=strategy)
    def run(case):
        response = case.call(headers={"Authorization": f"Bearer {raw_key}"})
        seen.add(response.status_code)
        calls.append(case.operation.label)
        case.validate_response(
            response, checks=[not_a_server_error, status_code_conformance, response_schema_conformance]
        )

    run()
    return seen, calls
