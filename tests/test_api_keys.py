from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from teams.keys import hash_key
from teams.models import ApiKey, Team


@pytest.mark.django_db
def test_create_team_is_idempotent():
    out = StringIO()
    call_command("create_team", "acme", stdout=out)
    call_command("create_team", "acme", stdout=out)
    assert Team.objects.filter(name="acme").count() == 1
    assert "created: team acme" in out.getvalue() and "exists: team acme" in out.getvalue()


@pytest.mark.django_db
def test_create_api_key_prints_raw_key_last_and_stores_only_a_hash():
    call_command("create_team", "acme", stdout=StringIO())
    out = StringIO()
    call_command("create_api_key", "--team", "acme", "--name", "ci", stdout=out)
    raw = out.getvalue().rstrip("\n").splitlines()[-1]
    assert raw.startswith("bgw_") and len(raw) > 40
    key = ApiKey.objects.get()
    assert key.key_hash == hash_key(raw) and key.key_hash != raw
    assert raw.startswith(key.prefix) and len(key.prefix) < len(raw) // 2
    # no column of any table holds the raw key
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM batches_apikey")
        for row in cursor.fetchall():
            assert all(raw not in str(value) for value in row)


@pytest.mark.django_db
def test_create_api_key_unknown_team_names_the_flag():
    with pytest.raises(CommandError, match="--team: no team named 'nope'"):
        call_command("create_api_key", "--team", "nope", stdout=StringIO())
    assert ApiKey.objects.count() == 0
