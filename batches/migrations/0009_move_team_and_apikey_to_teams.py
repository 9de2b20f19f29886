"""Team and ApiKey now live in the teams app (teams 0001): the foreign keys point at teams.Team/ApiKey
and the models leave this app's state. State only: the tables keep their names and rows."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("batches", "0008_batch_permissions"),
        ("openai_api", "0003_team_in_teams_app"),
        ("teams", "0001_team_and_apikey_from_batches"),
    ]

    operations = [
        # state only: the tables (batches_team, batches_apikey) and their rows stay as they are
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="batch",
                    name="api_key",
                    field=models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to="teams.apikey",
                    ),
                ),
                migrations.AlterField(
                    model_name="teamusagedaily",
                    name="team",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="usage", to="teams.team"
                    ),
                ),
                migrations.AlterField(
                    model_name="batch",
                    name="team",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT, related_name="batches", to="teams.team"
                    ),
                ),
                migrations.DeleteModel(
                    name="ApiKey",
                ),
                migrations.DeleteModel(
                    name="Team",
                ),
            ],
            database_operations=[],
        ),
    ]
