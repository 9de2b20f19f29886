"""A provider's kind and its own fields (issue #21): one check (gateway_engine.provider_file.kind_errors)
behind the engine's parser, the loader and the model; bad files are refused naming the field, with
nothing stored."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command
from django.db import IntegrityError, transaction

from gateway_engine import wire
from gateway_engine.provider_file import PROVIDER_KINDS, kind_errors
from gateway_engine.routing import ProviderConfig, routing_table_from_config
from providers.models import Provider, RoutingRule
from tests.providers.files import four_kinds

AZURE = {"kind": "azure_openai", "api_version": "2024-10-21", "burst_seconds": 1.0}


def test_the_kinds_are_the_contracts_each_spoken_by_a_wire_format():
    assert PROVIDER_KINDS == ("anthropic", "azure_openai", "bedrock", "gemini", "openai")
    assert wire.KNOWN_KINDS == PROVIDER_KINDS  # a kind the model accepts has a wire module, and back
    assert [value for value, _ in Provider._meta.get_field("kind").choices] == list(PROVIDER_KINDS)


@pytest.mark.parametrize(
    "values, expected",
    [
        (
            {"kind": "claude"},
            "p.kind: unknown kind 'claude' (known: anthropic, azure_openai, bedrock, gemini, openai)",
        ),
        ({"kind": "azure_openai", "burst_seconds": 1.0}, "p.api_version: required for kind azure_openai"),
        ({**AZURE, "api_version": "  "}, "p.api_version: required for kind azure_openai"),
        ({**AZURE, "burst_seconds": 5.0}, "p.burst_seconds: must be at most 1 for kind azure_openai"),
        (
            {"kind": "openai", "deployment": "d"},
            "p.deployment: only for kind azure_openai, not for kind openai",
        ),
        (
            {"kind": "gemini", "api_version": "v1"},
            "p.api_version: only for kind azure_openai, not for kind gemini",
        ),
    ],
)
def test_kind_errors_name_the_field(values, expected):
    errors = kind_errors("p", values)
    assert len(errors) == 1 and errors[0].startswith(expected), errors


def test_good_values_of_every_kind_pass():
    assert kind_errors("p", {}) == []  # the default kind, openai
    assert kind_errors("p", {**AZURE, "deployment": "prod"}) == []
    for kind in ("openai", "anthropic", "gemini"):
        assert kind_errors("p", {"kind": kind, "burst_seconds": 30.0}) == []


def test_the_engine_parser_refuses_bad_kinds_and_gives_azure_a_one_second_burst():
    entry = four_kinds()["providers"][1]
    config = ProviderConfig.from_dict(entry)
    assert (config.kind, config.deployment, config.api_version) == (
        "azure_openai",
        "gpt4o-prod",
        "2024-10-21",
    )
    assert config.limits.burst_seconds == 1.0  # the kind's default: Azure's windows are 1-10 s
    with pytest.raises(ValueError, match=r"providers\[1\]\.burst_seconds: must be at most 1"):
        ProviderConfig.from_dict({**entry, "burst_seconds": 5}, where="providers[1]")
    with pytest.raises(ValueError, match=r"provider\.api_version: required for kind azure_openai"):
        ProviderConfig.from_dict({k: v for k, v in entry.items() if k != "api_version"})
    claude = ProviderConfig.from_dict(four_kinds()["providers"][2])
    assert (claude.kind, claude.limits.itpm, claude.limits.otpm) == ("anthropic", 30_000, 8_000)
    table = routing_table_from_config(four_kinds())
    assert {p.kind for p in table.providers.values()} == set(PROVIDER_KINDS)


def _provider(**fields) -> Provider:
    values = dict(name="p", base_url="https://x.example/v1", model="m", rpm=1, tpm=1, max_concurrency=1)
    return Provider(**{**values, **fields})


@pytest.mark.django_db
def test_the_model_clean_puts_each_problem_on_its_field():
    with pytest.raises(ValidationError) as refused:
        _provider(kind="azure_openai", burst_seconds=5.0, deployment="").full_clean()
    errors = refused.value.message_dict
    assert errors["api_version"] == ["required for kind azure_openai"]
    assert errors["burst_seconds"][0].startswith("must be at most 1 for kind azure_openai")
    with pytest.raises(ValidationError) as refused:
        _provider(kind="openai", deployment="d").full_clean()
    assert refused.value.message_dict == {"deployment": ["only for kind azure_openai, not for kind openai"]}
    with pytest.raises(ValidationError) as refused:
        _provider(kind="cohere").full_clean()
    assert set(refused.value.message_dict) == {"kind"}  # said once, by the field's choices
    with pytest.raises(ValidationError) as refused:
        _provider(itpm=0).full_clean()
    assert set(refused.value.message_dict) == {"itpm"}
    _provider(**AZURE).full_clean()


@pytest.mark.django_db
def test_the_database_refuses_what_clean_would():
    for fields in ({"kind": "cohere"}, {"kind": "azure_openai", "burst_seconds": 1.0}, {**AZURE, "burst_seconds": 5.0},
                   {"itpm": 0}):  # fmt: skip
        with pytest.raises(IntegrityError), transaction.atomic():
            _provider(**fields).save()
    assert not Provider.objects.exists()


BEDROCK = {"kind": "bedrock", "region": "us-east-1", "aws_access_key_id": "AKIAEXAMPLE"}


@pytest.mark.django_db
def test_a_bedrock_provider_needs_its_region_and_key_id_in_clean_and_in_the_database():
    _provider(**BEDROCK).full_clean()
    with pytest.raises(ValidationError) as refused:
        _provider(kind="bedrock").full_clean()
    assert refused.value.message_dict == {
        "region": ["required for kind bedrock"],
        "aws_access_key_id": ["required for kind bedrock"],
    }
    with pytest.raises(ValidationError) as refused:
        _provider(region="us-east-1").full_clean()
    assert refused.value.message_dict == {"region": ["only for kind bedrock, not for kind openai"]}
    with pytest.raises(ValidationError, match="batch_api"):
        _provider(**BEDROCK, batch_api=True).full_clean()
    for fields in ({"kind": "bedrock"}, {**BEDROCK, "region": ""}):
        with pytest.raises(IntegrityError), transaction.atomic():
            _provider(**fields).save()
    assert not Provider.objects.exists()


def _load(tmp_path, data) -> str:
    path = tmp_path / "providers.json"
    path.write_text(json.dumps(data))
    out = StringIO()
    call_command("load_providers", str(path), stdout=out, stderr=StringIO())
    return out.getvalue()


@pytest.mark.django_db
def test_a_file_of_the_four_kinds_loads_and_loads_again_without_changes(tmp_path):
    out = _load(tmp_path, four_kinds())
    assert out.count("created provider") == 5
    rows = {p.name: p for p in Provider.objects.all()}
    assert {n: p.kind for n, p in rows.items()} == {
        "oai": "openai", "azure": "azure_openai", "claude": "anthropic", "gem": "gemini", "rock": "bedrock",
    }  # fmt: skip
    assert (rows["rock"].region, rows["rock"].aws_access_key_id) == ("us-east-1", "AKIAEXAMPLE")
    azure, claude = rows["azure"], rows["claude"]
    assert (azure.deployment, azure.api_version, azure.burst_seconds) == ("gpt4o-prod", "2024-10-21", 1.0)
    assert (claude.itpm, claude.otpm, rows["oai"].itpm) == (30_000, 8_000, None)
    assert RoutingRule.objects.count() == 5
    assert _load(tmp_path, four_kinds()).strip() == "no changes"


def _break_azure_api_version(data):
    del data["providers"][1]["api_version"]


@pytest.mark.parametrize(
    "mutate, expected",
    [
        (
            lambda d: d["providers"][2].update(kind="claude"),
            "providers[2] (claude).kind: unknown kind 'claude' (known: anthropic, azure_openai, bedrock, gemini, openai)",
        ),
        (_break_azure_api_version, "providers[1] (azure).api_version: required for kind azure_openai"),
        (
            lambda d: d["providers"][1].update(burst_seconds=5),
            "providers[1] (azure).burst_seconds: must be at most 1 for kind azure_openai",
        ),
        (
            lambda d: d["providers"][3].update(deployment="x"),
            "providers[3] (gem).deployment: only for kind azure_openai, not for kind gemini",
        ),
        (
            lambda d: d["providers"][2].update(itpm=0),
            "providers[2] (claude).itpm: Ensure this value is greater than or equal to 1",
        ),
        (lambda d: d["providers"][2].update(otpm="8000"), "providers[2] (claude).otpm: must be int"),
    ],
)
@pytest.mark.django_db
def test_a_bad_kind_field_refuses_the_whole_file_naming_it(tmp_path, mutate, expected):
    data = four_kinds()
    mutate(data)
    with pytest.raises(CommandError) as refused:
        _load(tmp_path, data)
    message = str(refused.value)
    assert "nothing was changed" in message and expected in message, message
    # the file's good providers and its routes are not half-stored either
    assert not Provider.objects.exists() and not RoutingRule.objects.exists()


@pytest.mark.django_db
def test_a_bad_update_leaves_the_stored_providers_as_they_were(tmp_path):
    _load(tmp_path, four_kinds())
    before = list(Provider.objects.order_by("name").values())
    data = four_kinds()
    data["providers"][0]["rpm"] = 999  # a good change beside the bad one
    data["providers"][0]["kind"] = "azure_openai"  # stored burst 5 (openai's default), no api_version
    with pytest.raises(CommandError) as refused:
        _load(tmp_path, data)
    assert "providers[0] (oai).api_version: required for kind azure_openai" in str(refused.value)
    assert "providers[0] (oai).burst_seconds: must be at most 1 for kind azure_openai" in str(refused.value)
    assert list(Provider.objects.order_by("name").values()) == before
