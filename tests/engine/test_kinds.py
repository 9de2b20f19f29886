"""Provider kinds: one descriptor per kind (gateway_engine/kinds.py) that every kind table is derived
from, and a kind without a batch API refused by the batch-API seam instead of spoken as OpenAI."""

from __future__ import annotations

import pytest

from gateway_engine import provider_file
from gateway_engine.batch_api import BatchTarget, for_target
from gateway_engine.batch_api.adoption import matches
from gateway_engine.kinds import KINDS, batch_protocol
from gateway_engine.remaining import HEADER_SEMANTICS
from gateway_engine.wire import KNOWN_KINDS, for_kind


def test_every_kind_table_is_the_descriptors():
    assert provider_file.PROVIDER_KINDS == KNOWN_KINDS == tuple(sorted(KINDS))
    assert set(HEADER_SEMANTICS) == set(KINDS)
    assert provider_file.REMAINING_HEADER_KINDS == {
        "anthropic",
        "azure_openai",
        "openai",
    }  # not gemini, bedrock
    assert provider_file.BATCH_API_KINDS == ("anthropic", "azure_openai", "openai")
    assert provider_file.KIND_ONLY_FIELDS == {
        "deployment": "azure_openai",
        "api_version": "azure_openai",
        "batch_deployment": "azure_openai",
        "region": "bedrock",
        "aws_access_key_id": "bedrock",
    }
    assert provider_file.BATCH_KIND_LIMITS["anthropic"] == (100_000, 256 * 1024 * 1024)
    assert provider_file.kind_defaults("azure_openai") == {"burst_seconds": 1.0}
    for kind in KINDS:
        assert for_kind(kind).kind == kind  # every described kind has a wire module


def target(kind: str) -> BatchTarget:
    return BatchTarget(kind=kind, base_url="http://127.0.0.1:9/v1", api_key="k", api_version=None,
                       batch_deployment=None, model="m")  # fmt: skip


@pytest.mark.parametrize("kind", ["gemini", "mistral"])
def test_a_kind_without_a_batch_api_is_refused_not_spoken_as_openai(kind):
    with pytest.raises(
        ValueError, match=f"kind '{kind}' has no batch API .*kinds: anthropic, azure_openai, openai"
    ):
        for_target(target(kind))
    with pytest.raises(ValueError, match="has no batch API"):
        matches(kind, [], "chunk", 0.0, 1)
    with pytest.raises(ValueError, match="has no batch API"):
        batch_protocol(kind)


def test_the_batch_protocol_of_each_batch_kind():
    assert {k: batch_protocol(k) for k in provider_file.BATCH_API_KINDS} == {
        "anthropic": "anthropic",
        "azure_openai": "openai",
        "openai": "openai",
    }
