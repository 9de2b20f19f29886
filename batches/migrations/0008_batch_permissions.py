"""Staff powers are permissions (issue #29): reading prompts and answers, retrying, cancelling, and
editing limits belong to the "gateway operator" group; is_staff alone sees aggregate pages only."""

from django.db import migrations

OPERATOR_GROUP = "gateway operator"
OPERATOR_PERMISSIONS = [
    ("batches", "batch", "view_content"),
    ("batches", "batch", "retry_batch"),
    ("batches", "batch", "cancel_batch"),
    ("batches", "batch", "view_batch"),
    ("batches", "team", "view_team"),
    ("batches", "team", "change_team"),
    ("providers", "provider", "view_provider"),
    ("providers", "provider", "change_provider"),
    ("providers", "routingrule", "view_routingrule"),
    ("providers", "routingrule", "change_routingrule"),
]


def make_operator_group(apps, schema_editor):
    from django.contrib.auth.management import create_permissions

    for app_config in apps.get_app_configs():  # permissions are otherwise made after all migrations
        app_config.models_module = True
        create_permissions(app_config, apps=apps, verbosity=0)
        app_config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    group, _ = Group.objects.get_or_create(name=OPERATOR_GROUP)
    for app_label, model, codename in OPERATOR_PERMISSIONS:
        perm = Permission.objects.filter(
            content_type__app_label=app_label, content_type__model=model, codename=codename
        ).first()
        if perm is not None:
            group.permissions.add(perm)


def drop_operator_group(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name=OPERATOR_GROUP).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("batches", "0007_team_file_quotas"),
        ("providers", "0002_origin_and_prices"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="batch",
            options={
                "ordering": ["-created_at"],
                "permissions": [
                    ("view_content", "Can read the prompts and answers of any team's batches"),
                    ("retry_batch", "Can retry a batch's failed items (spends that team's budget)"),
                    ("cancel_batch", "Can cancel any team's batch"),
                ],
                "verbose_name_plural": "batches",
            },
        ),
        migrations.RunPython(make_operator_group, drop_operator_group),
    ]
