"""The team foreign keys point at teams.Team (the model moved from batches; same table). State only."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("openai_api", "0002_file_expiry"),
        ("teams", "0001_team_and_apikey_from_batches"),
    ]

    operations = [
        # state only: the tables (batches_team, batches_apikey) and their rows stay as they are
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="file",
                    name="team",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="openai_files",
                        to="teams.team",
                    ),
                ),
                migrations.AlterField(
                    model_name="openaibatch",
                    name="team",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="openai_batches",
                        to="teams.team",
                    ),
                ),
            ],
            database_operations=[],
        ),
    ]
