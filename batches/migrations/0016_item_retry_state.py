from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("batches", "0015_usage_split"),
    ]

    operations = [
        migrations.AddField(
            model_name="batchitem",
            name="retry_state",
            field=models.JSONField(blank=True, null=True),
        ),
    ]
