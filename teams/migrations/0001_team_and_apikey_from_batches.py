"""Team and ApiKey move here from batches (batches 0009 drops them from its state): the models take over
the existing tables, no table or row is touched. Content types: 0002."""

import django.core.validators
import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("batches", "0008_batch_permissions"),
    ]

    operations = [
        # state only: the tables (batches_team, batches_apikey) and their rows stay as they are
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="Team",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("name", models.CharField(max_length=100, unique=True)),
                        (
                            "weight",
                            models.PositiveIntegerField(
                                default=1,
                                help_text="Share of a busy provider's rate relative to other teams (default 1).",
                                validators=[
                                    django.core.validators.MinValueValidator(1),
                                    django.core.validators.MaxValueValidator(1000),
                                ],
                            ),
                        ),
                        (
                            "daily_token_budget",
                            models.PositiveBigIntegerField(
                                blank=True, help_text="Tokens per UTC day; empty = unlimited.", null=True
                            ),
                        ),
                        (
                            "monthly_token_budget",
                            models.PositiveBigIntegerField(
                                blank=True, help_text="Tokens per UTC month; empty = unlimited.", null=True
                            ),
                        ),
                        (
                            "max_provider_share",
                            models.FloatField(
                                blank=True,
                                help_text="Hard cap on this team's share of any provider's RPM (0.01–1); empty = no cap.",
                                null=True,
                                validators=[
                                    django.core.validators.MinValueValidator(0.01),
                                    django.core.validators.MaxValueValidator(1.0),
                                ],
                            ),
                        ),
                        (
                            "max_pending_items",
                            models.PositiveIntegerField(
                                blank=True,
                                help_text="Items not yet finished across this team's batches; empty = GATEWAY_TEAM_MAX_PENDING_ITEMS.",
                                null=True,
                                validators=[django.core.validators.MinValueValidator(1)],
                            ),
                        ),
                        (
                            "max_open_batches",
                            models.PositiveIntegerField(
                                blank=True,
                                help_text="Unfinished batches at once; empty = GATEWAY_TEAM_MAX_OPEN_BATCHES.",
                                null=True,
                                validators=[django.core.validators.MinValueValidator(1)],
                            ),
                        ),
                        (
                            "max_submissions_per_minute",
                            models.PositiveIntegerField(
                                blank=True,
                                help_text="Batches submitted per minute; empty = GATEWAY_TEAM_MAX_SUBMISSIONS_PER_MINUTE.",
                                null=True,
                                validators=[django.core.validators.MinValueValidator(1)],
                            ),
                        ),
                        (
                            "max_stored_files",
                            models.PositiveIntegerField(
                                blank=True,
                                help_text="/v1 files (uploads and batch output) held at once; empty = GATEWAY_FILES_MAX_PER_TEAM.",
                                null=True,
                                validators=[django.core.validators.MinValueValidator(1)],
                            ),
                        ),
                        (
                            "max_stored_file_bytes",
                            models.PositiveBigIntegerField(
                                blank=True,
                                help_text="Bytes of /v1 files this team may hold; empty = GATEWAY_FILES_MAX_BYTES_PER_TEAM.",
                                null=True,
                                validators=[django.core.validators.MinValueValidator(1)],
                            ),
                        ),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                    ],
                    options={
                        "db_table": "batches_team",
                        "ordering": ["name"],
                        "constraints": [
                            models.CheckConstraint(
                                condition=models.Q(("weight__gte", 1)), name="team_weight_positive"
                            )
                        ],
                    },
                ),
                migrations.CreateModel(
                    name="ApiKey",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        (
                            "name",
                            models.CharField(
                                blank=True,
                                default="",
                                help_text="What the key is for (create_api_key --name).",
                                max_length=100,
                            ),
                        ),
                        ("prefix", models.CharField(db_index=True, editable=False, max_length=16)),
                        ("key_hash", models.CharField(editable=False, max_length=64, unique=True)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        ("last_used_at", models.DateTimeField(blank=True, editable=False, null=True)),
                        ("revoked_at", models.DateTimeField(blank=True, null=True)),
                        (
                            "team",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="api_keys",
                                to="teams.team",
                            ),
                        ),
                    ],
                    options={
                        "verbose_name": "API key",
                        "db_table": "batches_apikey",
                        "ordering": ["-created_at"],
                    },
                ),
            ],
            database_operations=[],
        ),
    ]
