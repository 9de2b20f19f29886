"""Provider keys are sealed at rest (least privilege, second pass): the column holds a Fernet token, never
the key; the engine still authenticates with the key (against the simulator, which checks it); rotation
re-seals every row; migration 0008 seals the rows stored in plain text before it. Before: the key was
the column's plain text, in every dump and backup."""

from __future__ import annotations

import asyncio

import pytest
from cryptography.fernet import Fernet
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from gateway_engine.http import AiohttpProviderClient
from providers import secrets
from providers.adapters import provider_config, provider_key
from providers.models import Provider
from sim.testing import sim_server  # noqa: F401 - the fixture

pytestmark = pytest.mark.django_db

KEY = "gsk_live-at-rest-0123456789abcdefXYZ"
MSG = [{"role": "user", "content": "hi"}]


def _column(name: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT api_key FROM providers_provider WHERE name = %s", [name])
        return cursor.fetchone()[0]


def _chat(config):
    async def go():
        client = AiohttpProviderClient(config)
        try:
            return await client.chat(MSG, {"max_tokens": 5})
        finally:
            await client.aclose()

    return asyncio.run(go())


def test_the_column_holds_no_key_and_the_engine_still_authenticates(sim_server, make_provider):  # noqa: F811
    sim = sim_server({"providers": {"a": {"api_key": KEY, "median_ms": 0}}})
    provider = make_provider("a", base_url=sim.provider_url("a"), api_key=KEY)
    stored = _column("a")
    assert KEY not in stored and KEY[:8] not in stored and stored.startswith(secrets.PREFIX)
    assert KEY not in provider.api_key  # the model attribute is sealed too, read back or not
    assert KEY not in Provider.objects.get(name="a").api_key
    outcome = _chat(provider_config(Provider.objects.get(name="a")))
    assert outcome.status_code == 200 and outcome.ok
    Provider.objects.filter(name="a").update(api_key="gsk_a-different-key-00000000")
    refused = _chat(provider_config(Provider.objects.get(name="a")))
    assert refused.status_code == 401  # the simulator does check the key
    assert sim.provider_counters("a")["requests"] == 2


def test_a_bedrock_secret_access_key_is_sealed_and_still_signs(sim_server, make_provider):  # noqa: F811
    """Kind bedrock keeps its secret access key in the same sealed column; the key id is not a secret."""
    aws = {"region": "us-east-1", "aws_access_key_id": "AKIASEALED"}
    model = "anthropic.claude-3-haiku-20240307-v1:0"
    sim = sim_server(
        {"providers": {"rock": {"kind": "bedrock", "model": model, "api_key": KEY, "median_ms": 0, **aws}}}
    )
    make_provider(
        "rock", kind="bedrock", base_url=sim.kind_url("rock", "bedrock"), model=model, api_key=KEY, **aws
    )
    stored = _column("rock")
    assert KEY not in stored and stored.startswith(secrets.PREFIX)
    outcome = _chat(provider_config(Provider.objects.get(name="rock")))
    assert outcome.status_code == 200 and outcome.ok  # signed with the revealed secret, verified by the sim
    Provider.objects.filter(name="rock").update(api_key="a-different-secret-key")
    refused = _chat(provider_config(Provider.objects.get(name="rock")))
    assert refused.status_code == 403 and "signature" in refused.message
    assert sim.provider_counters("rock")["requests"] == 2


def test_an_environment_secret_still_wins(make_provider, monkeypatch):
    provider = make_provider("envy", api_key=KEY)
    monkeypatch.setenv("GATEWAY_PROVIDER_SECRET_ENVY", "env-provided-key-123")
    assert provider_key(provider) == "env-provided-key-123"
    monkeypatch.delenv("GATEWAY_PROVIDER_SECRET_ENVY")
    assert provider_key(provider) == KEY


def test_no_lookup_value_can_match_the_sealed_column(make_provider):
    make_provider("gpt", api_key=KEY)
    assert not Provider.objects.filter(api_key__startswith=KEY[:4]).exists()
    assert not Provider.objects.filter(api_key=KEY).exists()


def test_rotation_reseals_every_row_with_the_newest_key(make_provider, settings):
    make_provider("r1", api_key=KEY)
    make_provider("r2", api_key="hf_second-provider-key-0000000")
    make_provider("r3")  # no key
    old = list(settings.GATEWAY_SECRET_KEYS)
    new = Fernet.generate_key().decode()
    settings.GATEWAY_SECRET_KEYS = [new, *old]
    before = _column("r1")
    call_command("rotate_provider_keys", stdout=open("/dev/null", "w"))
    assert _column("r1") != before and _column("r3") == ""
    settings.GATEWAY_SECRET_KEYS = [new]  # the old key dropped: the rows open with the new one alone
    assert provider_key(Provider.objects.get(name="r1")) == KEY
    assert provider_key(Provider.objects.get(name="r2")) == "hf_second-provider-key-0000000"


def test_rotation_refuses_whole_when_a_row_opens_with_no_configured_key(make_provider, settings):
    make_provider("s1", api_key=KEY)
    before = _column("s1")
    settings.GATEWAY_SECRET_KEYS = [Fernet.generate_key().decode()]
    with pytest.raises(CommandError, match="provider s1: .*none of GATEWAY_SECRET_KEYS"):
        call_command("rotate_provider_keys")
    assert _column("s1") == before


def test_a_plain_text_row_is_refused_loudly_not_sent(make_provider):
    make_provider("plain")
    with connection.cursor() as cursor:
        cursor.execute("UPDATE providers_provider SET api_key = %s WHERE name = 'plain'", [KEY])
    with pytest.raises(secrets.ProviderKeyUnreadable, match="plain text"):
        provider_config(Provider.objects.get(name="plain"))


@pytest.mark.django_db(transaction=True)
def test_migration_0008_seals_plain_rows_in_place_and_back(make_provider):
    from django.db.migrations.executor import MigrationExecutor

    make_provider("old", api_key="placeholder-to-be-overwritten")
    make_provider("none")
    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes()
    try:
        MigrationExecutor(connection).migrate([("providers", "0007_provider_pause")])
        with connection.cursor() as cursor:  # a row as stored before 0008: the key in plain text
            cursor.execute("UPDATE providers_provider SET api_key = %s WHERE name = 'old'", [KEY])
        MigrationExecutor(connection).migrate([("providers", "0008_encrypt_api_key")])
        stored = _column("old")
        assert stored.startswith(secrets.PREFIX) and KEY not in stored and _column("none") == ""
        # the columns as of 0008 only (later migrations add some)
        assert provider_key(Provider.objects.only("name", "api_key").get(name="old")) == KEY
        MigrationExecutor(connection).migrate([("providers", "0007_provider_pause")])
        assert _column("old") == KEY  # reversible: back to plain text
        MigrationExecutor(connection).migrate([("providers", "0008_encrypt_api_key")])
        assert _column("old").startswith(secrets.PREFIX)
    finally:  # the schema the other tests of this database expect (later migrations add columns)
        MigrationExecutor(connection).migrate(latest)
