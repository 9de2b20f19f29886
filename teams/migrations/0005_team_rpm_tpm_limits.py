import django.core.validators
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("teams", "0004_team_max_waiting_calls"),
    ]

    operations = [
        migrations.AddField(
            model_name="team",
            name="rpm_limit",
            field=models.PositiveIntegerField(
                blank=True,
                help_text="Requests per minute across all providers; empty = unlimited.",
                null=True,
                validators=[django.core.validators.MinValueValidator(1)],
            ),
        ),
        migrations.AddField(
            model_name="team",
            name="tpm_limit",
            field=models.PositiveBigIntegerField(
                blank=True,
                help_text="Tokens per minute across all providers (estimated at the grant, settled to the "
                "provider's usage); empty = unlimited.",
                null=True,
                validators=[django.core.validators.MinValueValidator(1)],
            ),
        ),
    ]
