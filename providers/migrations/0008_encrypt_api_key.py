"""Provider keys sealed at rest (providers/secrets.py): the column becomes a SealedKeyField and every
plain-text key already stored is encrypted in place with the newest of GATEWAY_SECRET_KEYS.

Reversible: going back decrypts every row to plain text again (it needs the same GATEWAY_SECRET_KEYS).
Raw SQL both ways: the field seals whatever the ORM writes, so plain text can only be written around it."""

from django.db import migrations

import providers.secrets


def _rows(schema_editor, table):
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(f"SELECT id, api_key FROM {table} WHERE api_key <> ''")
        return cursor.fetchall()


def _write(schema_editor, table, values):
    with schema_editor.connection.cursor() as cursor:
        for pk, value in values:
            cursor.execute(f"UPDATE {table} SET api_key = %s WHERE id = %s", [value, pk])


def seal_plain_keys(apps, schema_editor):
    table = apps.get_model("providers", "Provider")._meta.db_table
    rows = _rows(schema_editor, table)
    sealed = [(pk, providers.secrets.seal(key)) for pk, key in rows if not providers.secrets.is_sealed(key)]
    _write(schema_editor, table, sealed)


def open_sealed_keys(apps, schema_editor):
    table = apps.get_model("providers", "Provider")._meta.db_table
    rows = _rows(schema_editor, table)
    _write(schema_editor, table, [(pk, providers.secrets.reveal(key)) for pk, key in rows])


class Migration(migrations.Migration):

    dependencies = [
        ("providers", "0007_provider_pause"),
    ]

    operations = [
        migrations.AlterField(
            model_name="provider",
            name="api_key",
            field=providers.secrets.SealedKeyField(blank=True, default="", max_length=2000),
        ),
        migrations.RunPython(seal_plain_keys, open_sealed_keys),
    ]
