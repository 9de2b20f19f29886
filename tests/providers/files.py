"""Provider files of the four kinds (docs/contract.md §3, §5) for the loader and config tests."""

from __future__ import annotations

import copy


def four_kinds() -> dict:
    """One provider of each kind (the name predates the fifth, bedrock), each with its own fields, routed together."""
    return copy.deepcopy(
        {
            "providers": [
                {
                    "name": "oai",
                    "base_url": "https://api.openai.example/v1",
                    "model": "gpt-4o-mini",
                    "rpm": 500,
                    "tpm": 200_000,
                    "max_concurrency": 8,
                },
                {
                    "name": "azure",
                    "kind": "azure_openai",
                    "base_url": "https://contoso.openai.azure.com",
                    "model": "gpt-4o",
                    "deployment": "gpt4o-prod",
                    "api_version": "2024-10-21",
                    "rpm": 300,
                    "tpm": 50_000,
                    "max_concurrency": 4,
                },
                {
                    "name": "claude",
                    "kind": "anthropic",
                    "base_url": "https://api.anthropic.example/v1",
                    "model": "claude-sonnet-4-5",
                    "rpm": 50,
                    "tpm": 100_000,
                    "itpm": 30_000,
                    "otpm": 8_000,
                    "max_concurrency": 4,
                },
                {
                    "name": "gem",
                    "kind": "gemini",
                    "base_url": "https://generativelanguage.googleapis.example/v1beta",
                    "model": "gemini-2.5-flash",
                    "rpm": 1000,
                    "tpm": 1_000_000,
                    "max_concurrency": 8,
                },
                {
                    "name": "rock",
                    "kind": "bedrock",
                    "base_url": "https://bedrock-runtime.us-east-1.amazonaws.example",
                    "model": "anthropic.claude-3-haiku-20240307-v1:0",
                    "region": "us-east-1",
                    "aws_access_key_id": "AKIAEXAMPLE",
                    "rpm": 100,
                    "tpm": 200_000,
                    "max_concurrency": 4,
                },
            ],
            "routes": [
                {"route": "mix", "provider": "oai"},
                {"route": "mix", "provider": "azure"},
                {"route": "mix", "provider": "claude", "priority": 1},
                {"route": "mix", "provider": "gem", "priority": 2},
                {"route": "mix", "provider": "rock", "priority": 2},
            ],
        }
    )
