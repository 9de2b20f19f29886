"""Team and ApiKey moved from the batches app to teams without touching the data: a database made at
the migrations before the move (batches 0008, openai_api 0002, no teams), filled through the historical
models with teams, API keys, batches, usage, a /v1 file, admin log entries and a staff user with
permissions, is migrated forward (and post_migrate runs, as `manage.py migrate` does): every row is
found through the new models, the content types keep their ids under app "teams", the default
permissions exist once with their old ids, and the group's and the user's permissions still hold.
Migrating back re-labels the content types to "batches" again.

Runs on a scratch database of its own (the test database stays as it is): the default connection is
pointed at it for the test, because migrations (batches 0008) write through the default alias.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.contrib.contenttypes.models import ContentType
from django.core.management.sql import emit_post_migrate_signal
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.urls import reverse

from batches.models import Batch, TeamUsageDaily
from openai_api.models import File
from teams.models import ApiKey, Team

pytestmark = pytest.mark.slow

MOVED_APPS = {"batches": "0008_batch_permissions", "openai_api": "0002_file_expiry", "teams": None}
MOVED_MODELS = ("team", "apikey")


# apps made after the move whose first migration needs teams: not there yet in a database from before it
LATER_APPS = {"interactive": None, "webhooks": None, "response_cache": None, "provider_batches": None}


def _targets_before(executor: MigrationExecutor) -> list[tuple[str, str | None]]:
    leaves = [
        n for n in executor.loader.graph.leaf_nodes() if n[0] not in MOVED_APPS and n[0] not in LATER_APPS
    ]
    return leaves + list(MOVED_APPS.items()) + list(LATER_APPS.items())


def _migrate(targets: list[tuple[str, str | None]]) -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    return executor


@pytest.fixture
def scratch_database(django_db_setup, django_db_blocker) -> Iterator[str]:
    """An empty database; the default connection points at it until the test ends."""
    settings_dict = connection.settings_dict
    test_name = settings_dict["NAME"]
    scratch = f"{test_name}_teams_move"
    with django_db_blocker.unblock():
        with connection.cursor() as cursor:
            cursor.execute(f'DROP DATABASE IF EXISTS "{scratch}"')
            cursor.execute(f'CREATE DATABASE "{scratch}"')
        connection.close()
        settings_dict["NAME"] = scratch
        ContentType.objects.clear_cache()
        try:
            yield scratch
        finally:
            connection.close()
            settings_dict["NAME"] = test_name
            ContentType.objects.clear_cache()
            with connection.cursor() as cursor:
                cursor.execute(f'DROP DATABASE IF EXISTS "{scratch}"')


def _fill_before(executor: MigrationExecutor, targets) -> dict:
    """Rows made through the models as they were before the move; returns what to look for after."""
    old = executor.loader.project_state([t for t in targets if t[1] is not None]).apps
    team_model, key_model = old.get_model("batches", "Team"), old.get_model("batches", "ApiKey")
    acme = team_model.objects.create(name="acme", weight=3, daily_token_budget=1000, max_provider_share=0.5)
    globex = team_model.objects.create(name="globex", max_pending_items=7)
    key = key_model.objects.create(team=acme, name="ci", prefix="bgw_aaaaaaaa", key_hash="a" * 64)
    key_model.objects.create(team=globex, prefix="bgw_bbbbbbbb", key_hash="b" * 64)
    batch = old.get_model("batches", "Batch").objects.create(team=acme, api_key=key, total_count=2)
    old.get_model("batches", "TeamUsageDaily").objects.create(
        team=globex, provider="alpha", day=date(2026, 11, 30), prompt_tokens=5
    )
    old.get_model("openai_api", "File").objects.create(
        id="file-moved", team=globex, purpose="batch", filename="in.jsonl", bytes=3, storage_name="x"
    )
    ct_model = old.get_model("contenttypes", "ContentType")
    cts = {m: ct_model.objects.get(app_label="batches", model=m) for m in MOVED_MODELS}
    perm_model = old.get_model("auth", "Permission")
    perms = {p.codename: p.id for p in perm_model.objects.filter(content_type__in=list(cts.values()))}
    user = old.get_model("auth", "User").objects.create(username="ops", is_staff=True)
    user.user_permissions.add(perm_model.objects.get(codename="add_apikey", content_type=cts["apikey"]))
    group = old.get_model("auth", "Group").objects.get(name="gateway operator")
    user.groups.add(group)
    log = old.get_model("admin", "LogEntry").objects
    entries = [
        log.create(
            user=user,
            content_type=cts["team"],
            object_id=str(acme.pk),
            object_repr="acme",
            action_flag=CHANGE,
        ),
        log.create(
            user=user, content_type=cts["apikey"], object_id=str(key.pk), object_repr="k", action_flag=CHANGE
        ),
    ]
    # a "teams" content type a post_migrate made early (a partial migrate): folded into the old one
    stray = ct_model.objects.create(app_label="teams", model="team")
    perm_model.objects.create(content_type=stray, codename="add_team", name="Can add team")
    entries.append(log.create(user=user, content_type=stray, object_id=str(acme.pk), action_flag=CHANGE))
    return {
        "teams": {t.pk: (t.name, t.weight, t.daily_token_budget) for t in team_model.objects.all()},
        "keys": {k.pk: (k.team_id, k.key_hash) for k in key_model.objects.all()},
        "batch": (batch.pk, acme.pk, key.pk),
        "content_types": {m: ct.id for m, ct in cts.items()},
        "permissions": perms,
        "group_permissions": set(group.permissions.values_list("id", flat=True)),
        "entries": {
            e.pk: (cts["team"].id if e.content_type_id == stray.id else e.content_type_id, e.object_id)
            for e in entries
        },
        "team_entry": entries[0].pk,
    }


def _check_rows(before: dict) -> None:
    assert {t.pk: (t.name, t.weight, t.daily_token_budget) for t in Team.objects.all()} == before["teams"]
    assert {k.pk: (k.team_id, k.key_hash) for k in ApiKey.objects.all()} == before["keys"]
    batch_id, team_id, key_id = before["batch"]
    batch = Batch.objects.select_related("team", "api_key").get(pk=batch_id)
    assert (batch.team.pk, batch.api_key.pk) == (team_id, key_id)
    assert TeamUsageDaily.objects.get().team.name == "globex"
    assert File.objects.get(pk="file-moved").team.name == "globex"
    assert Team.objects.get(name="acme").api_keys.get().name == "ci"


def _check_content_types_and_permissions(before: dict) -> None:
    ContentType.objects.clear_cache()
    for model_class, model in ((Team, "team"), (ApiKey, "apikey")):
        ct = ContentType.objects.get_for_model(model_class)
        assert (ct.id, ct.app_label) == (before["content_types"][model], "teams")
        assert not ContentType.objects.filter(app_label="batches", model=model).exists()
    moved = Permission.objects.filter(content_type_id__in=before["content_types"].values())
    assert sorted(moved.values_list("codename", flat=True)) == sorted(before["permissions"])  # once each
    assert {p.codename: p.id for p in moved} == before["permissions"]
    group = Group.objects.get(name="gateway operator")
    assert set(group.permissions.values_list("id", flat=True)) == before["group_permissions"]
    user = get_user_model().objects.get(username="ops")
    assert {"teams.add_apikey", "teams.change_team", "teams.view_team"} <= user.get_all_permissions()
    assert not any(
        p.startswith("batches.") and p.endswith(("_team", "_apikey")) for p in user.get_all_permissions()
    )
    for pk, (ct_id, object_id) in before["entries"].items():
        entry = LogEntry.objects.get(pk=pk)
        assert (entry.content_type_id, entry.object_id) == (ct_id, object_id)
        assert entry.get_edited_object().pk == int(object_id)
    team_entry = LogEntry.objects.get(pk=before["team_entry"])
    assert team_entry.get_admin_url() == reverse("admin:teams_team_change", args=[team_entry.object_id])


def test_a_database_from_before_the_move_keeps_every_row_content_type_and_permission(scratch_database):
    executor = MigrationExecutor(connection)
    before_targets = _targets_before(executor)
    executor = _migrate(before_targets)
    before = _fill_before(executor, before_targets)

    _migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
    emit_post_migrate_signal(verbosity=0, interactive=False, db=connection.alias)

    _check_rows(before)
    _check_content_types_and_permissions(before)

    _migrate(before_targets)  # and back: the content types return to "batches", same ids
    ContentType.objects.clear_cache()
    back = ContentType.objects.filter(id__in=before["content_types"].values())
    assert sorted(back.values_list("app_label", "model")) == [("batches", "apikey"), ("batches", "team")]
    _migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
