# Routing by capacity (issue #40): BatchItem.moved_from, the held-back provider an item was moved from.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("batches", "0020_item_target"),
    ]

    operations = [
        migrations.AddField(
            model_name="batchitem",
            name="moved_from",
            field=models.CharField(blank=True, db_default="", default="", max_length=64),
        ),
    ]
