import django.core.validators
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("teams", "0003_team_log_interactive_content"),
    ]

    operations = [
        migrations.AddField(
            model_name="team",
            name="max_waiting_calls",
            field=models.PositiveIntegerField(
                db_default=1000,
                default=1000,
                help_text="/v1/chat/completions calls of this team that may wait for quota at once per web process (default 1000); one more is answered 429 team_waiting_limit.",
                validators=[django.core.validators.MinValueValidator(1)],
            ),
        ),
    ]
