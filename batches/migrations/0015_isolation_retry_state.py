from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("batches", "0014_batch_provider_batch"),
    ]

    operations = [
        migrations.AddField(
            model_name="batchitem",
            name="retry_state",
            field=models.JSONField(blank=True, null=True),
        ),
    ]
