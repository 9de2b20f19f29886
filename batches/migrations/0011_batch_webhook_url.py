from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("batches", "0010_item_native_answer_cache_tokens"),
    ]

    operations = [
        migrations.AddField(
            model_name="batch",
            name="webhook_url",
            field=models.CharField(blank=True, default="", max_length=2048),
        ),
        migrations.AddIndex(
            model_name="batch",
            index=models.Index(
                condition=models.Q(("completed_at__isnull", False)), fields=["completed_at"], name="batch_completed"
            ),
        ),
    ]
