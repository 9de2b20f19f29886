# Pipelines (issue #40): Batch.steps, BatchItem.step_index and BatchItem.pipeline.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("batches", "0017_endpoint"),
    ]

    operations = [
        migrations.AddField(
            model_name="batch",
            name="steps",
            field=models.JSONField(blank=True, db_default=[], default=list),
        ),
        migrations.AddField(
            model_name="batchitem",
            name="step_index",
            field=models.PositiveSmallIntegerField(db_default=0, default=0),
        ),
        migrations.AddField(
            model_name="batchitem",
            name="pipeline",
            field=models.JSONField(blank=True, null=True),
        ),
    ]
