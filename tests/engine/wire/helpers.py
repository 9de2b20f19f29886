"""Shared test helpers for the wire formats: a provider config per kind and the fixtures (each fixture
file names the reference page its shapes were copied from, under "source")."""

from __future__ import annotations

import json
import pathlib
from typing import Any

from gateway_engine.routing import ProviderConfig

FIXTURES = pathlib.Path(__file__).parent / "fixtures"


def fixture(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text())
    assert data["source"].startswith("https://"), f"{name}.json must cite its source"
    return data


def config(kind: str, **overrides: object) -> ProviderConfig:
    entry: dict[str, object] = {
        "name": {
            "anthropic": "claude",
            "gemini": "gem",
            "azure_openai": "azure",
            "openai": "alpha",
            "bedrock": "rock",
        }[kind],
        "base_url": {
            "anthropic": "https://api.anthropic.test/v1/",
            "gemini": "https://generativelanguage.test/v1beta",
            "azure_openai": "https://res.openai.azure.test/",
            "openai": "http://alpha.test/v1/",
            "bedrock": "https://bedrock-runtime.us-east-1.amazonaws.test",
        }[kind],
        "model": {
            "anthropic": "claude-sonnet-4",
            "gemini": "gemini-2.5-flash",
            "azure_openai": "gpt-4o",
            "openai": "gpt-4o",
            "bedrock": "anthropic.claude-3-haiku-20240307-v1:0",
        }[kind],
        "rpm": 60,
        "tpm": 100000,
        "max_concurrency": 2,
        "api_key": "sk-test",
        "kind": kind,
    }
    if kind == "azure_openai":
        entry["api_version"] = "2024-10-21"
    if kind == "bedrock":
        entry.update(region="us-east-1", aws_access_key_id="AKIATEST")
    entry.update(overrides)
    return ProviderConfig.from_dict(entry)


def encoded(body: Any) -> bytes:
    return json.dumps(body).encode()
