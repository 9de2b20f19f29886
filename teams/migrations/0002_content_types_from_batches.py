"""The moved models' content types are re-labelled from app "batches" to "teams", keeping their ids: admin
log entries, the default permissions (add/change/delete/view_team, …_apikey, codenames unchanged) and
the "gateway operator" group's and users' permissions stay attached to the same rows, and the
post_migrate signal finds them (so it creates no second set).

On a fresh database the batches content types may not exist yet (nothing to re-label: post_migrate
makes the teams ones). If a post_migrate already made the "teams" rows before this ran (a partial
migrate between batches 0009 and here), they are folded into the old rows: their log entries and any
permission the old row lacks move over, their duplicate default permissions are dropped.
"""

from django.db import migrations

MOVED_MODELS = ("team", "apikey")


def _fold(apps, db: str, extra, kept) -> None:
    """Move what hangs off content type `extra` onto `kept`, then delete `extra`."""
    permission = apps.get_model("auth", "Permission")
    log_entry = apps.get_model("admin", "LogEntry")
    log_entry.objects.using(db).filter(content_type_id=extra.id).update(content_type_id=kept.id)
    codenames = set(
        permission.objects.using(db).filter(content_type_id=kept.id).values_list("codename", flat=True)
    )
    extra_perms = permission.objects.using(db).filter(content_type_id=extra.id)
    extra_perms.exclude(codename__in=codenames).update(content_type_id=kept.id)
    extra_perms.filter(codename__in=codenames).delete()
    extra.delete()


def _relabel(apps, schema_editor, source: str, target: str) -> None:
    content_type = apps.get_model("contenttypes", "ContentType")
    db = schema_editor.connection.alias
    for model in MOVED_MODELS:
        old = content_type.objects.using(db).filter(app_label=source, model=model).first()
        if old is None:
            continue
        new = content_type.objects.using(db).filter(app_label=target, model=model).first()
        if new is not None:
            _fold(apps, db, new, old)
        old.app_label = target
        old.save(update_fields=["app_label"])
    content_type.objects.clear_cache()


def forwards(apps, schema_editor) -> None:
    _relabel(apps, schema_editor, "batches", "teams")


def backwards(apps, schema_editor) -> None:
    _relabel(apps, schema_editor, "teams", "batches")


class Migration(migrations.Migration):
    dependencies = [
        ("teams", "0001_team_and_apikey_from_batches"),
        ("batches", "0009_move_team_and_apikey_to_teams"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("admin", "0003_logentry_add_action_flag_choices"),
    ]

    operations = [migrations.RunPython(forwards, backwards)]
